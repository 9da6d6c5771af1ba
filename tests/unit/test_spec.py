"""The experiment file models (bench/spec.py): parsing, defaults, one-line errors, schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import SpecabError
from bench.experiment import Experiment, json_schema, load_spec, parse_spec, resolve_path

MINIMAL = """
[experiment]
name = "x"
[server]
model = "m"
[probes]
sets = ["p.jsonl"]
[[arms]]
name = "a"
[[arms]]
name = "b"
args = { max_num_seqs = 2, enforce-eager = false }
draft_config = { rope_parameters = { partial_rotary_factor = 1.0 } }
"""


def write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "e.toml"
    f.write_text(text)
    return f


def test_minimal_file_defaults_and_baseline(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL))
    assert spec.experiment.boots_per_arm == 3
    assert spec.baseline == "a"
    assert spec.arm("b").args == {"max_num_seqs": 2, "enforce-eager": False}
    assert spec.arm("b").draft_config == {"rope_parameters": {"partial_rotary_factor": 1.0}}
    assert spec.server.per_boot_seed is True
    with pytest.raises(SpecabError, match="use one of: a, b"):
        spec.arm("c")


def test_sha256_is_stable_and_content_sensitive(tmp_path: Path) -> None:
    a = load_spec(write(tmp_path, MINIMAL)).sha256()
    assert a == load_spec(write(tmp_path, MINIMAL)).sha256()
    assert a != load_spec(write(tmp_path, MINIMAL.replace("= 2", "= 3"))).sha256()


def test_frozen_and_extra_forbidden() -> None:
    with pytest.raises(ValueError):
        Experiment.model_validate({"experiment": {"name": "x"}, "bogus": 1})


@pytest.mark.parametrize(
    ("old", "new", "field", "fix"),
    [
        ('name = "x"', 'name = "x y"', "experiment.name", "letters, digits"),
        ('name = "b"', 'name = "b"\nbogus = 1', "arms(b).bogus", "remove or rename it"),
        ('sets = ["p.jsonl"]', "sets = []", "probes.sets", "at least one"),
        ('name = "x"', 'name = "x"\nalpha = 0.7', "experiment.alpha", "smaller value"),
        ('name = "x"', 'name = "x"\nbaseline = "zz"', "experiment.baseline", "choose one of"),
        (
            "max_num_seqs = 2",
            "max_num_seqs = { a = 1 }",
            "arms(b).args.max_num_seqs",
            "false removes the flag",
        ),
        (
            'name = "x"',
            'name = "x"\nboots_per_arm = "3"',
            "experiment.boots_per_arm",
            "whole number",
        ),
    ],
)
def test_errors_name_file_field_and_fix(
    tmp_path: Path, old: str, new: str, field: str, fix: str
) -> None:
    f = write(tmp_path, MINIMAL.replace(old, new, 1))
    with pytest.raises(SpecabError) as info:
        load_spec(f)
    line = info.value.one_line()
    assert "\n" not in line
    assert line.startswith(f"{f}: {field}: "), line
    assert fix in line.split(". Fix: ")[1], line


def test_parse_spec_reports_unknown_table_before_missing_one(tmp_path: Path) -> None:
    import tomllib

    data = tomllib.loads(MINIMAL.replace("[[arms]]", "[[arm]]"))
    with pytest.raises(SpecabError, match=r": arm: unknown field.* Fix: did you mean `arms`\?"):
        parse_spec(data, tmp_path / "e.toml")


def test_resolve_path_is_relative_to_the_file(tmp_path: Path) -> None:
    f = tmp_path / "sub" / "e.toml"
    assert resolve_path(f, "m/x") == tmp_path / "sub" / "m" / "x"
    assert resolve_path(f, "/abs/x") == Path("/abs/x")
    # printed and recorded normalized, never as .../sub/../demo/x
    assert str(resolve_path(f, "../demo/x")) == str(tmp_path / "demo" / "x")
    assert str(resolve_path(f, "/abs/../x")) == "/x"


def test_json_schema_has_descriptions_everywhere() -> None:
    schema = json_schema()
    assert schema["$schema"].startswith("https://json-schema.org/")

    def props(node: object) -> list[tuple[str, dict[str, object]]]:
        out = []
        if isinstance(node, dict):
            for k, v in node.get("properties", {}).items():
                out.append((k, v))
            for v in node.values():
                out.extend(props(v))
        elif isinstance(node, list):
            for v in node:
                out.extend(props(v))
        return out

    fields = props(schema)
    assert len(fields) > 30
    assert [k for k, v in fields if "description" not in v] == []
