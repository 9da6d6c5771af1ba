"""Hub ids: lint reads config.json from a local Hugging Face cache laid out like the real one
(models--ORG--NAME/refs/main -> snapshots/<commit>/config.json, a symlink into blobs/),
found through HF_HUB_CACHE / HF_HOME as huggingface_hub finds it. Nothing is downloaded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run
from bench.experiment import lint_file
from bench.experiment.lint import cached_config, hub_cache_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def put_in_cache(cache: Path, repo: str, config: dict[str, Any], commit: str = COMMIT) -> Path:
    """Store `config` as huggingface_hub would: a blob, a snapshot symlink, refs/main."""
    root = cache / ("models--" + repo.replace("/", "--"))
    blob = json.dumps(config).encode()
    digest = hashlib.sha256(blob).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / digest).write_bytes(blob)
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "config.json").symlink_to(Path("..", "..", "blobs", digest))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    return snap / "config.json"


def experiment(tmp_path: Path, arms: str = "") -> Path:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = tmp_path / "exp.toml"
    f.write_text(
        '[experiment]\nname = "hub"\n[server]\nmodel = "deepseek-ai/DeepSeek-V4-Flash"\n'
        'speculative_config = { method = "dspark", model = "nvidia/DeepSeek-V4-Flash-DSpark", '
        'num_speculative_tokens = 5 }\n[probes]\nsets = ["p.jsonl"]\n'
        '[[arms]]\nname = "baseline"\n' + arms
    )
    return f


def seed_000_cache(cache: Path) -> None:
    for repo, which in (
        ("deepseek-ai/DeepSeek-V4-Flash", "target"),
        ("nvidia/DeepSeek-V4-Flash-DSpark", "draft"),
    ):
        cfg = json.loads((FIXTURES / "dspark-v4" / which / "config.json").read_text())
        put_in_cache(cache, repo, cfg)


def test_hub_ids_are_read_from_the_cache_named_by_hf_hub_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "hf-cache"
    seed_000_cache(cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    f = experiment(tmp_path, "target_config = { vocab_size = 129280 }\n")
    report = lint_file(f)
    (finding,) = report.findings
    assert finding.field == "compress_ratios" and "ids 44, 45 fall past" in finding.problem
    assert run(["lint", str(f), "--configs-only"]) == 1
    assert "baseline: warning: compress_ratios:" in capsys.readouterr().out


def test_not_cached_is_a_note_not_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    f = experiment(tmp_path)
    (note,) = lint_file(f).findings
    assert (note.severity, note.check, note.field) == ("note", "unchecked", "server.model")
    assert "not in the local Hugging Face cache" in note.problem
    assert run(["lint", str(f), "--configs-only"]) == 0
    out = capsys.readouterr().out
    assert "1 thing(s) could not be checked in 1 arm(s); no other findings" in out


def test_the_arms_env_names_the_cache_the_server_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_000_cache(tmp_path / "arm-cache")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    f = experiment(tmp_path, f'env = {{ HF_HUB_CACHE = "{tmp_path / "arm-cache"}" }}\n')
    (finding,) = lint_file(f).findings
    assert finding.severity == "warning" and finding.field == "compress_ratios"
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "hub").symlink_to(tmp_path / "arm-cache")
    f = experiment(tmp_path, f'env = {{ HF_HOME = "{tmp_path / "home"}" }}\n')
    (finding,) = lint_file(f).findings
    assert finding.severity == "warning" and finding.field == "compress_ratios"


def test_no_draft_model_reads_nothing_unless_mtp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n-gram needs no config pair (no note for an uncached target); MTP heads do."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    f = experiment(tmp_path)
    src = f.read_text().split("speculative_config")[0]
    tail = '[probes]\nsets = ["p.jsonl"]\n[[arms]]\nname = "baseline"\n'
    f.write_text(src + 'speculative_config = { method = "ngram" }\n' + tail)
    assert lint_file(f).findings == ()
    f.write_text(src + 'speculative_config = { method = "deepseek_mtp" }\n' + tail)
    (note,) = lint_file(f).findings
    assert note.severity == "note"


def test_cache_dir_resolution_order(tmp_path: Path) -> None:
    assert hub_cache_dir({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert hub_cache_dir({"HF_HUB_CACHE": "~/c"}) == Path("~/c").expanduser()
    assert hub_cache_dir({"HUGGINGFACE_HUB_CACHE": "/old"}) == Path("/old")
    assert hub_cache_dir({"HF_HOME": "/b"}) == Path("/b/hub")
    assert hub_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hub_cache_dir({}) == Path("~/.cache/huggingface/hub").expanduser()


def test_revisions_and_agreement_with_huggingface_hub(tmp_path: Path) -> None:
    """Our stdlib lookup and huggingface_hub's try_to_load_from_cache give the same file."""
    pytest.importorskip("huggingface_hub")
    cache = tmp_path / "c"
    env = {"HF_HUB_CACHE": str(cache)}
    main = put_in_cache(cache, "org/m", {"vocab_size": 1})
    other = "f" * 40
    pinned = put_in_cache(cache, "org/m", {"vocab_size": 2}, commit=other)
    (cache / "models--org--m" / "refs" / "main").write_text(COMMIT)  # main stays the first
    cases = [(None, main), ("main", main), (other, pinned), ("v9", None), ("0" * 40, None)]
    for rev, expected in cases:
        for use_hub in (True, False):
            got = cached_config("org/m", env, revision=rev, use_hub=use_hub)
            assert got == expected, (rev, use_hub)
    assert cached_config("org/absent", env) is None
    assert cached_config("org/absent", env, use_hub=False) is None
