"""Reading an experiment file into its models: the TOML document, the arms a `[sweep]` or
`[screen]` generates, and every validation problem as one `SpecabError` line naming file,
field path and fix. Runs no git and writes nothing: a `[bisect] git` range comes back as its
template arm (`bench.experiment.history` makes its points)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.errors import SpecabError
from bench.experiment.spec.bisect_section import as_template
from bench.experiment.spec.error_lines import spec_error
from bench.experiment.spec.experiment_file import Experiment
from bench.experiment.spec.screen_section import expand_screen
from bench.experiment.spec.sweep import expand_sweep


def parse_spec(data: dict[str, Any], file: Path) -> Experiment:
    """Validate a parsed TOML document; raise SpecabError for the first problem. Runs no git
    and writes nothing: a `[bisect] git` range comes back as its template arm."""
    return validate_document(expand_screen(expand_sweep(as_template(data, file), file), file), file)


def validate_document(data: dict[str, Any], file: Path) -> Experiment:
    """The document as an Experiment, its first problem one SpecabError (what `parse_spec`
    and a git range's points, made from the document, are both checked by)."""
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, data, file, Experiment) from None


def read_document(path: str | Path) -> dict[str, Any]:
    """The experiment file's TOML as a document; a missing or unreadable file, or bad TOML,
    is one SpecabError."""
    p = Path(path)
    if not p.is_file():
        raise SpecabError("experiment file not found", file=p, fix="pass the path of a .toml file")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecabError(
            f"not valid TOML ({exc})", file=p, fix="correct the TOML syntax"
        ) from None
    except UnicodeDecodeError:
        raise SpecabError("not UTF-8 text", file=p, fix="save the file as UTF-8") from None
    except OSError as exc:
        raise SpecabError(
            f"cannot be read ({exc.strerror})", file=p, fix="check the file's permissions"
        ) from None


def load_spec(path: str | Path) -> Experiment:
    """Read, parse and validate an experiment file; paths stay as written (`resolve_path`).
    A `[bisect] git` range stays its template: commands that need its points load the file
    with `bench.experiment.load_experiment`."""
    return parse_spec(read_document(path), Path(path))
