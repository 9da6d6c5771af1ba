"""Which image a container arm's member runs on its node, by content: the runtime's image id
for the arm's reference, read without pulling (`<runtime> image inspect`). A gang's members
run on other nodes than its head: each must hold the image, and the same content under that
tag, or the boot would serve two vLLM builds while its row records the head's."""

from __future__ import annotations

import subprocess

from bench.experiment.spec import ContainerSpec

INSPECT_TIMEOUT_S = 60.0
IMAGE_DIFFERS = "another image under"  # how a member's mismatch is said (the loop reads it)


def image_id(c: ContainerSpec) -> str | None:
    """The image's content id on this node (None: the runtime does not have it here, or does
    not answer). Never pulls."""
    cmd = [c.runtime, "image", "inspect", "--format", "{{.Id}}", c.image]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = out.stdout.strip().splitlines()
    return found[0].strip() if out.returncode == 0 and found else None


def differs(c: ContainerSpec, node: str, mine: str, head: str) -> str:
    """One line: this node holds other content under the arm's image reference."""
    return (
        f"{IMAGE_DIFFERS} {c.image} on node {node}: {mine[:19]}, the head's is {head[:19]} "
        f"(a stale pull): `{c.runtime} pull {c.image}` (or load the same image) on every node"
    )
