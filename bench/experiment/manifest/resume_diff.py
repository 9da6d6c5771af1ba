"""Resume integrity: a results directory never holds two versions of an arm.

`resume_changes(old, new, where=)` compares the manifest a results directory was started
with against the one this run would write, in this order: the arms (each arm's whole
definition — patch contents by sha256, overlays and effective configs, args, env,
interpreter and its vLLM version), the probe sets (sha256), then the rest of the
experiment file. A resume may change only what does not change what a boot measures
(`RESUME_MAY_CHANGE`: more boots, retry limits, timeouts, descriptions); anything else is
refused naming the arm or field, a short diff and the fix. An arm that has no ok boot in the
directory yet may change (a broken arm fixed after the run stopped on it), and a directory
without any ok boot accepts every change.

The old spec is first re-read with this specab's models, so a field that a later specab
added with a default is not a change (its spec hash differs, its meaning does not). The
same holds for arm definitions: keys added to `ResolvedArm.definition()` later appear only
when they differ from their default.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.errors import SpecabError
from bench.experiment.probes import ProbeSet
from bench.experiment.spec import Experiment
from bench.records import Manifest

# Dotted spec fields a resume may change ("arms(*)" matches any arm).
RESUME_MAY_CHANGE = frozenset(
    {
        "experiment.boots_per_arm",
        "experiment.max_attempts",
        "experiment.max_failures_per_arm",
        "server.ready_timeout_s",
        "server.stop_grace_s",
        "probes.request_timeout_s",
        "arms(*).description",
    }
)
_FIX = (
    "restore it (the directory's manifest.json lists what ran), or start a new results "
    "directory (--results-dir)"
)
_SHOWN = 3  # differences named in one error line
_CRN = "common_random_numbers"


def probe_sets_sha256(sets: Sequence[ProbeSet]) -> str:
    """One hash over the probe sets a boot ran (name and content sha256, in order)."""
    blob = json.dumps([[s.name, s.sha256] for s in sets]).encode()
    return hashlib.sha256(blob).hexdigest()


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaves of a JSON-like value. A list of tables with a `name` is keyed by name
    (`arms(fix).args`, `patches(aux_fix).sha256`) plus its `(names)` in order; any other
    list is one leaf."""
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out if out or not prefix else {prefix: {}}
    named = (
        isinstance(obj, list) and obj and all(isinstance(x, Mapping) and "name" in x for x in obj)
    )
    if named:
        out = {f"{prefix}(names)": [x["name"] for x in obj]}
        for x in obj:
            body = {k: v for k, v in x.items() if k != "name"}
            out.update(flatten(body, f"{prefix}({x['name']})"))
        return out
    return {prefix: obj}


def _short(v: Any) -> str:
    if v is None:
        return "(absent)"
    text = json.dumps(v, sort_keys=True, default=str) if not isinstance(v, str) else v
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12] + "…"  # a sha256
    return text if len(text) <= 48 else text[:45] + "…"


def diff(old: Any, new: Any) -> dict[str, tuple[Any, Any]]:
    """{dotted key: (old, new)} for every leaf that differs (absent = None)."""
    a, b = flatten(old), flatten(new)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def describe(changes: Mapping[str, tuple[Any, Any]]) -> str:
    """`key: old → new; …` for the first few differences, then how many more."""
    items = [f"{k}: {_short(o)} → {_short(n)}" for k, (o, n) in list(changes.items())[:_SHOWN]]
    more = len(changes) - _SHOWN
    return "; ".join(items) + (f" (and {more} more)" if more > 0 else "")


def resume_changes(
    old_manifest: Manifest,
    new_manifest: Manifest,
    *,
    where: str | Path,
    proven: Collection[str] | None = None,
) -> dict[str, tuple[Any, Any]]:
    """Raise SpecabError when continuing the directory whose manifest is `old` with a run
    whose manifest would be `new` could mix versions; return the accepted changes
    ({dotted key: (old, new)}, for the manifest's record).

    `proven`: the arms with ok boots in the directory (None: all of them). An arm without
    one may change (there is no version of it to mix with), and a directory without any ok
    boot accepts every change."""
    old, new = old_manifest.to_json(), new_manifest.to_json()  # a generic dotted diff
    proven = {a["name"] for a in new.get("arms", [])} if proven is None else set(proven)
    if not proven:
        return {
            **diff(old.get("spec"), new.get("spec")),
            **diff({"arms": old.get("arms")}, {"arms": new.get("arms")}),
        }
    accepted = _arms(old, new, where, proven)
    _probe_sets(old, new, where)
    was, now = old.get("orchestration") or {}, new.get("orchestration") or {}
    if _CRN in was and _CRN in now and was[_CRN] != now[_CRN]:  # seeds paired across arms
        raise SpecabError(
            f"this directory was started {'with' if was[_CRN] else 'without'} "
            "--common-random-numbers",
            file=where,
            field="orchestration.common_random_numbers",
            fix="resume with the options it was started with, or start a new results "
            "directory (--results-dir)",
        )
    return {**accepted, **_spec(old, new, where, proven)}


def _arms(
    old: Mapping[str, Any], new: Mapping[str, Any], where: str | Path, proven: set[str]
) -> dict[str, tuple[Any, Any]]:
    """The same arms; every proven arm's definition unchanged. Returns the definition
    changes of arms that have no ok boot yet."""
    before = {a["name"]: a for a in old.get("arms", []) if isinstance(a, Mapping) and "name" in a}
    now = {a["name"]: a for a in new.get("arms", [])}
    if before and set(before) != set(now):
        added, gone = sorted(set(now) - set(before)), sorted(set(before) - set(now))
        what = ", ".join([*(f"added {a}" for a in added), *(f"removed {a}" for a in gone)])
        raise SpecabError(
            f"the arms changed since this directory was started ({what})",
            file=where,
            field="arms",
            fix=_FIX,
        )
    accepted: dict[str, tuple[Any, Any]] = {}
    for name, arm in now.items():
        was = before.get(name)
        if was is None or was.get("definition_sha256") == arm.get("definition_sha256"):
            continue
        changes = diff(was.get("definition"), arm.get("definition")) if "definition" in was else {}
        if name not in proven:
            accepted |= {f"arms({name}).definition.{k}": v for k, v in changes.items()}
            continue
        raise SpecabError(
            f"arm {name!r} changed since this directory was started: "
            + (describe(changes) or "its definition hash differs"),
            file=where,
            field=f"arms({name})",
            fix=_FIX,
        )
    return accepted


def _probe_sets(old: Mapping[str, Any], new: Mapping[str, Any], where: str | Path) -> None:
    if "probe_sets" not in old:
        return
    key = ("name", "sha256", "count")
    before = [{k: s.get(k) for k in key} for s in old["probe_sets"]]
    now = [{k: s.get(k) for k in key} for s in new["probe_sets"]]
    changes = diff({"sets": before}, {"sets": now})
    if changes:
        raise SpecabError(
            f"the probe sets changed since this directory was started: {describe(changes)}",
            file=where,
            field="probes.sets",
            fix=_FIX,
        )


def _allowed(key: str, proven: set[str]) -> bool:
    if key.startswith("arms(") and ")." in key:
        arm, rest = key[5:].split(").", 1)
        if arm not in proven:
            return True  # an arm without an ok boot may change
        key = "arms(*)." + rest
    return key in RESUME_MAY_CHANGE


def _spec(
    old: Mapping[str, Any], new: Mapping[str, Any], where: str | Path, proven: set[str]
) -> dict[str, tuple[Any, Any]]:
    if not isinstance(old.get("spec"), Mapping):  # another tool's manifest: hashes only
        if old.get("spec_sha256") != new.get("spec_sha256"):
            raise SpecabError(
                "experiment file changed since this directory was started (spec hash differs)",
                file=where,
                field="spec_sha256",
                fix=_FIX,
            )
        return {}
    try:
        then = Experiment.model_validate(old["spec"]).redacted_dump()
    except ValidationError as exc:
        version = old.get("specab_version", "?")
        raise SpecabError.invalid(
            exc,
            file=where,
            field="spec",
            fix="resume with the specab version that started it, or start a new results "
            "directory (--results-dir)",
            problem=lambda loc, msg: (
                "this specab cannot read the experiment the directory "
                f"was started with (specab {version}; {loc}: {msg})"
            ),
        ) from None
    changes = diff(then, new["spec"])
    refused = {k: v for k, v in changes.items() if not _allowed(k, proven)}
    if refused:
        raise SpecabError(
            f"experiment file changed since this directory was started: {describe(refused)}",
            file=where,
            field=next(iter(refused)),
            fix="restore it (a resume may change only boots_per_arm, max_attempts, "
            "max_failures_per_arm, timeouts, descriptions, and arms without an ok boot), or "
            "start a new results directory (--results-dir)",
        )
    return changes
