"""vLLM's own engine-configuration check of every arm, before any boot.

The server builds its engine configuration (`AsyncEngineArgs.create_engine_config`) right
after parsing its flags and before it loads weights: that step refuses a misspelt
`speculative_config` key (`SpeculativeConfig.num_speculative_token: Unexpected keyword
argument`), a `max-model-len` beyond the model's own length, a method the draft cannot run.
`parse_with_vllm.py` runs it, in the same vLLM import as the parser check, for each arm's
real command line (model paths and config overlays as a boot sees them) with the arm's
environment (no secrets, no patches); answers are cached by the build, the command line (model
paths aside), that environment and the content of the models' JSON files.

What it leaves to the boot: container arms (the image's vLLM), arms whose models are not on
this machine, and runs on a cluster (`run-ab --address`: the nodes' build and memory decide).
An arm whose patch names the refused config class or field is warned, not refused: the patch
may be what makes the setting valid.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch import LaunchPlan, ResolvedArm, materialize_overlay
from bench.experiment.preflight.build_refusals import patches_mention
from bench.experiment.preflight.model_paths import origin
from bench.experiment.spec import Experiment, is_secret_env

# Variables of the arm's env that reach the check (what the engine config reads); the patch
# runtime's and PYTHONPATH stay out, so no patch runs there.
_ENV_PREFIXES = ("VLLM_", "HF_", "TRANSFORMERS_", "OMP_")
_PATCH_ENV = ("VLLM_PLUGINS",)


@dataclass(frozen=True)
class EngineLine:
    """One arm's engine check: its real server arguments, the environment they run under
    and the cache key (build aside) of everything the answer depends on."""

    arm: str
    argv: list[str]
    env: dict[str, str]
    key: str

    def request(self) -> dict[str, object]:
        return {"argv": self.argv, "env": self.env}


def _model_files(path: str) -> list[tuple[str, str]]:
    """The JSON files of a local model directory with their content hashes (config,
    generation config, tokenizer config: what the engine configuration reads)."""
    d = Path(path)
    if not d.is_dir():
        return []
    return [
        (p.name, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(d.glob("*.json"))
        if p.is_file() and not p.name.startswith(".") and p.stat().st_size < 16 * 2**20
    ]


def _models(argv: list[str]) -> list[str]:
    out: list[str] = []
    for flag, value in itertools.pairwise(argv):
        if flag == "--model":
            out.append(value)
        elif flag == "--speculative-config":
            model = json.loads(value).get("model")
            out += [str(model)] if model else []
    return out


def _unplaced(arg: str, models: list[str]) -> str:
    for i, m in enumerate(models):
        arg = arg.replace(m, f"MODEL{i}")
    return arg


def engine_line(arm: ResolvedArm, plan: LaunchPlan, scratch: Path) -> EngineLine | None:
    """The arm's engine check, its config overlays built under `scratch` as the plan named
    them; None when it cannot run here (a model that is not a local directory)."""
    for which, base, patch in (
        ("target", arm.model, arm.target_config),
        ("draft", arm.draft_model, arm.draft_config),
    ):
        if patch is not None and base is not None and which in plan.overlays:
            materialize_overlay(Path(base), patch, scratch / "overlays", create=True)
    argv = list(plan.server_args)
    models = _models(argv)
    if not models or not all(Path(m).is_dir() for m in models):
        return None
    env = {
        k: v
        for k, v in arm.env.items()
        if k.startswith(_ENV_PREFIXES) and k not in _PATCH_ENV and not is_secret_env(k)
    }
    # where the models lie is not part of the answer, what their JSON files say is: copies of
    # one model (every test's, every checkout's) share it
    placed = [_unplaced(a, models) for a in argv]
    material = [placed, sorted(env.items()), [_model_files(m) for m in models]]
    key = hashlib.sha256(json.dumps(material).encode()).hexdigest()
    return EngineLine(arm.name, argv, env, key)


def _short(message: str, limit: int = 400) -> str:
    """vLLM's words up to the end of the sentence that passes `limit` (its advice on
    environment overrides that follows is left out)."""
    if len(message) <= limit:
        return message
    cut = message.find(". ", limit // 2)
    return message[: cut + 1] if 0 < cut <= limit else message[:limit] + " …"


def _field(spec: Experiment, arm: ResolvedArm, message: str) -> str:
    """Where the refused setting is written: a speculative_config key the message names, a
    flag of `args` it names (snake_case in vLLM's words), else the arm."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))
    if message.startswith("SpeculativeConfig"):
        for key in arm.speculative_config:
            if key in words:
                return origin(spec, arm.name, "speculative_config", key)
    for flag in arm.args:
        if flag.replace("-", "_") in words:
            return origin(spec, arm.name, "args", flag)
    if message.startswith("SpeculativeConfig"):
        own = spec.arm(arm.name).speculative_config
        return f"arms({arm.name}).speculative_config" if own else "server.speculative_config"
    return f"arms({arm.name})"


def _patch_may_change_it(arm: ResolvedArm, message: str) -> bool:
    """A patch of the arm names the refused config class or one of the fields the message
    names: it may be what adds that setting, so the refusal is only a warning."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]{5,}", message)
    return patches_mention(arm, {w for w in words if "_" in w or w[0].isupper()})


def engine_refusal(
    spec: Experiment,
    spec_file: Path,
    arm: ResolvedArm,
    message: str,
    version: str,
) -> str | None:
    """Raise the one-line SpecabError for vLLM's refusal; a warning line instead when a
    patch of the arm may change the verdict."""
    message, fix = _suggestion(arm, message)
    message = _short(message)
    field = _field(spec, arm, message)
    if _patch_may_change_it(arm, message):
        return (
            f"{field}: vLLM {version} refuses the engine configuration without the arm's "
            f"patches ({message}); a patch of the arm names it, so the boot decides"
        )
    raise SpecabError(
        f"vLLM {version} ({arm.python}) refuses the engine configuration before loading "
        f"weights: {message}",
        file=spec_file,
        field=field,
        fix=fix
        or "correct the setting (vLLM's own words above name it); every boot would fail "
        "the same way",
    )


_CHOICES = re.compile(r"^(?P<cls>\w+)\.(?P<key>\w+): Input should be (?P<values>.+)$")
_UNKNOWN = re.compile(r"^(?P<cls>\w+)\.(?P<key>\w+): (?P<msg>.+?) \(fields: (?P<names>.+)\)$")


def _written(arm: ResolvedArm, cls: str, key: str) -> object:
    """The value the arm gives the refused setting (a speculative_config key or a flag)."""
    if cls == "SpeculativeConfig":
        return arm.speculative_config.get(key)
    return arm.args.get(key.replace("_", "-"))


def _suggestion(arm: ResolvedArm, message: str) -> tuple[str, str | None]:
    """vLLM's refusal of a misspelt name, with 'did you mean' from vLLM's own names: the
    values a setting takes (listed whole), or the fields its config class has."""
    if m := _CHOICES.match(message):
        values = re.findall(r"'([^']*)'", m["values"])
        value = _written(arm, m["cls"], m["key"])
        if not values or not isinstance(value, str):
            return message, None
        close = difflib.get_close_matches(value, values, n=1, cutoff=0.6)
        said = f"{m['cls']}.{m['key']}: {value!r} is not one of vLLM's values"
        hint = f"did you mean {close[0]!r}? " if close else ""
        return said, f"{hint}{m['key']} takes one of: {', '.join(values)}"
    if m := _UNKNOWN.match(message):
        names = [n.strip() for n in m["names"].split(",")]
        close = difflib.get_close_matches(m["key"], names, n=1, cutoff=0.6)
        said = f"{m['cls']}.{m['key']}: {m['msg']}"
        if close:
            return said, f"did you mean `{close[0]}`? (rename it; {m['cls']} has no {m['key']})"
        return said, f"remove or rename it: {m['cls']} takes {', '.join(names)}"
    return message, None
