"""The provenance summary of a results directory: arms, patches, overlays, what else
differs from the baseline arm, vLLM versions, hosts, GPUs, probe sets (manifest + boots).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from bench.records import Results


def _compact(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")) if obj else "—"


# Keys of an arm definition that the provenance table shows in their own columns, or that
# only restate the arm (its name, the configs that result from the overlays).
_OWN_COLUMNS = {"name", "patches", "target_config", "draft_config"}
_DERIVED = {"effective_target_config", "effective_draft_config"}


def _flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(obj, Mapping):  # an empty table sets nothing
        out: dict[str, str] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: json.dumps(obj, sort_keys=True, default=str)}


def differences(definition: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    """What else sets this arm apart from the baseline: args, env, speculative_config,
    python, model (dotted keys; secrets are already redacted in the manifest)."""
    skip = _OWN_COLUMNS | _DERIVED
    mine = _flatten({k: v for k, v in definition.items() if k not in skip})
    base = _flatten({k: v for k, v in baseline.items() if k not in skip})
    changed = [
        f"{k}={mine[k]}" if k in mine else f"{k} unset"
        for k in sorted(set(mine) | set(base))
        if mine.get(k) != base.get(k)
    ]
    return "; ".join(changed) or "—"


def provenance(results: Results, baseline: str | None = None) -> dict[str, Any]:
    """What was run, where and with what: arms, patches, overlays, vLLM versions, hosts, GPUs,
    and what else differs from the baseline arm's definition."""
    manifest = results.manifest
    boots = results.boots
    defs = {e.name: e.definition for e in manifest.arms}
    base_def = defs.get(str(baseline or manifest.baseline or ""), {})
    arms = []
    for entry in manifest.arms:
        name = entry.name
        d = defs[name]
        b = boots[boots["arm"] == name] if len(boots) else boots
        patches = [
            f"{p.get('name', p.get('path', '?'))} ({str(p.get('sha256') or '')[:12]})"
            if isinstance(p, Mapping)
            else str(p)
            for p in d.get("patches", []) or []
        ]
        arms.append(
            {
                "arm": name,
                "definition_sha256": entry.definition_sha256[:12],
                "patches": ", ".join(patches) or "—",
                "target_config overlay": _compact(d.get("target_config")),
                "draft_config overlay": _compact(d.get("draft_config")),
                "other differences from baseline": differences(d, base_def) if base_def else "—",
                "vllm_version": ", ".join(sorted(set(b["vllm_version"].dropna().astype(str))))
                if len(b)
                else "—",
                "boots ok / attempts": f"{int((b['status'] == 'ok').sum()) if len(b) else 0}"
                f" / {len(b)}",
            }
        )

    def distinct(column: str) -> list[str]:
        if boots.empty:
            return []
        return sorted({str(v) for v in boots[column].dropna()} - {""})

    probe_sets = [
        f"{p.name} ({p.count} probes, sha256 {p.sha256[:12]})" for p in manifest.probe_sets
    ]
    return {
        "experiment": results.experiment,
        "created_at": manifest.created_at,
        "specab_version": manifest.specab_version,
        "spec_sha256": manifest.spec_sha256[:16],
        "arms": pd.DataFrame(arms),
        "probe_sets": probe_sets,
        "vllm_versions": distinct("vllm_version"),
        "hosts": distinct("host"),
        "gpus": distinct("gpu"),
    }
