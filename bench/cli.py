"""The `specab` console script: Typer app; user errors caught once, printed as one line, exit 2."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from typer._click import exceptions as click_exc  # Typer >= 0.24 vendors click

from bench.commands import (
    analyze,
    boot,
    demo_models,
    export,
    gate,
    lint,
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
    """Print the specab version."""
    from bench import __version__

    typer.echo(__version__)


@app.callback()
def _root() -> None:
    """Multi-boot A/B benchmarks of speculative-decoding acceptance in vLLM."""


for _module in COMMAND_MODULES:
    _module.register(app)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code: 0 ok, 1 failure, 2 user error, 130 interrupted.

    Tests call this directly; the console script wraps it in `main`.
    """
    try:
        rc = app(args=argv, standalone_mode=False)
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
