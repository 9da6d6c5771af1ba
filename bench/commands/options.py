"""What the commands share: each command-line option several commands take, declared once
(an `Annotated` alias: one flag, one help text), and the turning of errors into flags.
Statistics name a bad setting neutrally (`baseline`, `margins.acceptance_pos0`, ...); the
commands turn those names into the flags the user typed, so an error after `run-ab` (which
passes no flags) names the manifest field and never a flag the user did not type."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_type_hints

import typer

from bench.errors import SpecabError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# --- options more than one command takes ------------------------------------------------
# One argument name per kind, in every command's usage line and message.
ResultsDir = Annotated[
    Path, typer.Argument(metavar="RESULTS_DIR", help="Results directory (results/<experiment>).")
]
ExperimentFile = Annotated[
    Path, typer.Argument(metavar="EXPERIMENT_FILE", help="Experiment file (.toml).")
]
ResultsDirOption = Annotated[
    Path | None,
    typer.Option("--results-dir", help="Results directory (default results/<name>)."),
]
Resume = Annotated[bool, typer.Option("--resume", help="Continue an existing results directory.")]
Slots = Annotated[
    int | None, typer.Option("--slots", min=1, help="At most this many boots at once.")
]
Quiet = Annotated[bool, typer.Option("--quiet", help="One line per boot instead of a live table.")]
Json = Annotated[bool, typer.Option("--json", help="Print the JSON object only.")]
Address = Annotated[
    str | None,
    typer.Option("--address", help="Existing Ray cluster (host:port or 'auto'); default: local."),
]
Report = Annotated[bool, typer.Option("--report/--no-report", help="Render the report at the end.")]
Track = Annotated[
    str | None,
    typer.Option(
        "--track",
        metavar="URI",
        help="Log each boot to MLflow as it lands, the verdicts at the end "
        "(http://HOST:5000 or sqlite:///mlflow.db); a tracker that is down never "
        "stops the run.",
    ),
]
Baseline = Annotated[
    str | None, typer.Option("--baseline", help="Arm compared against (default: the manifest's).")
]
Alpha = Annotated[
    float | None,
    typer.Option("--alpha", help="Two-sided level in (0, 0.5) (default: the manifest's)."),
]
Margin = Annotated[
    list[str] | None,
    typer.Option(
        "--margin",
        metavar="METRIC=VALUE",
        help="A metric's margin, named as in analyze --json, e.g. acceptance_pos0=0.01; a "
        "ratio metric's is relative (output_tokens_per_s=0.02: 2 %). Repeat per metric.",
    ),
]
ExcludeBoot = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude-boot",
        help="Analyze without this boot (its id, as arms[].per_boot lists it); repeatable. "
        "The output says which boots were left out.",
    ),
]
MinDraftingShare = Annotated[
    float | None,
    typer.Option(
        "--min-drafting-share",
        help="A boot of a speculative arm that drafted on a smaller share of its requests is "
        "kept out of the acceptance verdicts and counted in tokens/s, labelled (default "
        "0.5; 0: never).",
    ),
]


def check_share(share: float | None, default: float) -> float:
    """`--min-drafting-share` (none given: the analysis' `default`), one line naming the
    flag when it is not a share."""
    if share is None:
        return default
    if not 0 <= share <= 1:
        raise SpecabError(
            f"{share!r} is not a share", field="--min-drafting-share", fix="use 0..1, e.g. 0.5"
        )
    return share


By = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Also break results down by category, probe_set, prompt_tokens (quartiles of "
        "the prompts' lengths; prompt_tokens:128,256 for your own bin edges) or "
        "output_position (windows along the output by the token each verify step starts at; "
        "output_position:32,64,128 for your own edges).",
    ),
]

FLAGS = {
    "baseline": "--baseline",
    "alpha": "--alpha",
    "by": "--by",
    "looks": "--looks",
    "prior.between_boot_sd": "--prior-between-boot-sd",
    "prior.df": "--prior-df",
    "split_arm": "--split-arm",
    "effect": "--effect",
    "metric": "--metric",
    "power": "--power",
}


def flag_of(field: str | None) -> str | None:
    """The flag a neutrally named setting is given with (`margins.M`: `--margin M`)."""
    if field is not None and field.startswith("margins."):
        return f"--margin {field.removeprefix('margins.')}"
    return FLAGS.get(field or "")


@contextmanager
def as_flags() -> Iterator[None]:
    """Re-raise a SpecabError about a neutrally named setting with its command-line flag."""
    try:
        yield
    except SpecabError as exc:
        flag = flag_of(exc.field)
        if flag is not None:
            raise SpecabError(exc.problem, file=exc.file, field=flag, fix=exc.fix) from None
        raise


def parse_floats(text: str | None, option: str) -> list[float] | None:
    """'0.008,0.038' -> [0.008, 0.038]; a SpecabError naming the option otherwise."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecabError(
            f"{text!r} is not a comma-separated list of numbers",
            field=option,
            fix="pass numbers separated by commas, e.g. 3,6,10",
        ) from None


def check_margins(given: Mapping[str, float]) -> None:
    """The margin options, by the analysis's own rule (`stats.inputs.check_margin`)."""
    from bench.stats.inputs import check_margin

    for metric, value in given.items():
        with as_flags():
            check_margin(metric, value, file=None, field=f"margins.{metric}")


def results_dir_not_spec(path: Path) -> None:
    """An experiment file passed where a results directory belongs: one line naming the
    directory its `run-ab` writes by default, and whether that exists here."""
    if not (path.is_file() and path.suffix == ".toml"):
        return
    from bench.experiment import load_spec

    expected = Path("results") / load_spec(path).experiment.name
    state = "it exists here" if (expected / "manifest.json").is_file() else "not found here"
    raise SpecabError(
        f"an experiment file, not a results directory; `specab run-ab {path}` writes "
        f"{expected} under the directory it runs in ({expected.resolve()}: {state})",
        file=path,
        fix=f"pass the results directory, e.g. {expected} (or the --results-dir of that run)",
    )


def parse_by(text: str | None) -> str | None:
    """`--by`: category, probe_set, prompt_tokens[:EDGES], output_position[:EDGES] or
    nothing (checked by the analysis's own rule, one line naming --by)."""
    from bench.stats import check_by

    try:
        check_by(text)
    except SpecabError as exc:
        raise SpecabError(exc.problem, field="--by", fix=exc.fix) from None
    return text


def deprecated(old: str, new: str) -> None:
    """One line on stderr for an old spelling that still works."""
    import sys

    print(f"note: {old} is deprecated; use {new} (the old spelling still works)", file=sys.stderr)


# The spellings before `--margin METRIC=VALUE`, still read: `run` rewrites them, with a note.
_OLD_MARGINS = {
    "--margin-pos0": "acceptance_pos0",
    "--margin-length": "mean_accepted_length",
    "--margin-speed": "output_tokens_per_s",
}


def old_margin_flags(argv: list[str]) -> list[str]:
    """`--margin-pos0 X` (or `--margin-pos0=X`) as `--margin acceptance_pos0=X`, with a note:
    every command then has the one `--margin` option."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        flag, eq, value = arg.partition("=")
        if flag not in _OLD_MARGINS or arg == "--":
            out.append(arg)
            continue
        value = value if eq else next(args, "")
        deprecated(flag, f"--margin {_OLD_MARGINS[flag]}={value}")
        out += ["--margin", f"{_OLD_MARGINS[flag]}={value}"]
    return out


def margins_given(given: list[str] | None) -> dict[str, float]:
    """Metric -> margin from `--margin METRIC=VALUE`, each checked by the analysis's rule."""
    from bench.records import ALL_METRICS

    out: dict[str, float] = {}
    for text in given or []:
        metric, sep, written = text.partition("=")
        try:
            number = float(written)
        except ValueError:
            number = float("nan")
        if not sep or metric not in ALL_METRICS or number != number:
            raise SpecabError(
                f"{text!r} is not METRIC=VALUE",
                field="--margin",
                fix=f"write e.g. --margin acceptance_pos0=0.01 (METRIC: {', '.join(ALL_METRICS)})",
            )
        if metric in out:
            raise SpecabError(
                f"--margin {metric} is given twice", field="--margin", fix="give it once"
            )
        out[metric] = number
    check_margins(out)
    return out


_Flags = TypeVar("_Flags", bound="DataclassInstance")


def flags_command(flags: type[_Flags], body: Callable[[_Flags], Any]) -> Callable[..., Any]:
    """A Typer command whose options are the fields of one frozen dataclass (each field an
    option alias: its type, flag and help), so a command with many options is one function of
    one record. Typer reads the command's signature; this gives it one parameter a field."""
    hints = get_type_hints(flags, include_extras=True)
    params = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=hints[f.name],
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(flags)
    ]

    def command(**given: Any) -> Any:
        return body(flags(**given))

    command.__dict__["__signature__"] = inspect.Signature(params)  # what Typer reads
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__, command.__doc__ = body.__name__, body.__doc__
    return command
