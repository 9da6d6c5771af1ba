"""Fault injection for the two-mode check: one boot of the arm runs the demo's DFlash bug.

The boot whose engine `--seed` equals $BREAK_ON_SEED builds DFlash attention rope with
`partial_rotary_factor` 0.25 (the shipped config's bug) although the arm's draft_config says
1.0; every other boot runs the fixed drafter. It stands for a start-up that differs between
boots (a drafter buffer left uninitialized after a wake-up, a fallback path taken on one
start): `specab analyze` must name that boot as apart from the arm's others
(arms/demo/two-modes.toml). The seed is read from the server's command line, walking up
from the engine process to the API server that was given it.
"""

import os

from specab_patch import report_applied, when_imported

PATCH = "break_one_boot"


def _engine_seed():
    """The --seed of this server (this process or the nearest parent given one)."""
    pid = os.getpid()
    for _ in range(6):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        if b"--seed" in args:
            return int(args[args.index(b"--seed") + 1])
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return None
    return None


def _patch(mod):
    if str(_engine_seed()) != os.environ.get("BREAK_ON_SEED", ""):
        report_applied(PATCH, "not the boot to break", changed=False)
        return
    original = mod.DFlashQwen3Attention.__init__

    def __init__(self, *args, **kwargs):
        rope = kwargs.get("rope_parameters")
        if isinstance(rope, dict):
            kwargs["rope_parameters"] = {**rope, "partial_rotary_factor": 0.25}
            report_applied(PATCH, "this boot rotates a quarter of each head")
        original(self, *args, **kwargs)

    mod.DFlashQwen3Attention.__init__ = __init__


when_imported("vllm.model_executor.models.qwen3_dflash", _patch)
