"""The `specab` console script: Typer app; user errors caught once, printed as one line, exit 2."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import typer.models
from rich.console import Console
from typer._click import exceptions as click_exc  # Typer >= 0.24 vendors click
from typer.core import TyperOption

from bench.commands import (
    analyze,
    boot,
    demo_models,
    export,
    gate,
    lint,
    options,
    probes,
    report,
    run_ab,
    selftest,
    validate,
)
from bench.errors import SpecabError

app = typer.Typer(
    name="specab",
    help="Multi-boot A/B benchmarks of speculative-decoding acceptance in vLLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

# One module per subcommand (bench/commands/<name>.py), each with `register(app)`.
COMMAND_MODULES = [
    validate, lint, demo_models, boot, analyze, run_ab, selftest, report, probes, gate, export,
]  # fmt: skip


@app.command()
def version() -> None:
    """Print the specab version (also `specab --version`)."""
    from bench import __version__

    typer.echo(__version__)


def _print_version(value: bool) -> None:
    if value:
        version()
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the specab version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Multi-boot A/B benchmarks of speculative-decoding acceptance in vLLM."""


for _module in COMMAND_MODULES:
    _module.register(app)

# `specab --help` lists the commands in the order a user meets them, in panels (Typer lists
# a panel's command groups, here probes, reference and export, after its commands).
WORKFLOW: dict[str, tuple[str, ...]] = {
    "Before a run": ("validate", "lint", "materialize", "schema", "demo-models", "probes"),
    "Run": ("run-ab", "bisect", "status", "boot", "trace", "selftest"),
    "Read the results": ("analyze", "report", "plan", "gate", "reference", "export"),
    "About": ("version",),
}
_ORDER = [name for names in WORKFLOW.values() for name in names]
_PANEL = {name: panel for panel, names in WORKFLOW.items() for name in names}


def _name(info: typer.models.CommandInfo | typer.models.TyperInfo) -> str:
    callback = info.callback
    return info.name or (callback.__name__ if callback is not None else "")


_infos: list[typer.models.CommandInfo | typer.models.TyperInfo] = [
    *app.registered_commands,
    *app.registered_groups,
]
for _info in _infos:
    _info.rich_help_panel = _PANEL[_name(_info)]  # a new command: place it in WORKFLOW
app.registered_commands.sort(key=lambda info: _ORDER.index(_name(info)))


def _flag_without_type(self: TyperOption, ctx: Any) -> str | None:
    """A flag is shown as a flag (`--resume`), not `--resume <bool>`, which read as if it
    took a value (`--resume=yes` is refused)."""
    return None if self.is_flag else _option_type(self, ctx)


_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign]


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code: 0 ok, 1 failure, 2 user error, 130 interrupted.

    Tests call this directly; the console script wraps it in `main`.
    """
    args = options.old_margin_flags(sys.argv[1:] if argv is None else list(argv))
    try:
        rc = app(args=args, standalone_mode=False)
    except SpecabError as exc:
        err_console.print(f"error: {exc.one_line()}", markup=False)
        return 2
    except click_exc.UsageError as exc:
        err_console.print(f"error: {exc.format_message()}", markup=False)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("interrupted")
        return 130
    except typer.Exit as exc:
        return int(exc.exit_code)
    return rc if isinstance(rc, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
