"""Which image a container arm's member runs on its node, by content: a digest of the image's
filesystem layers (their diff ids) and of the config a container runs with (env, entrypoint,
command, working directory, user), read without pulling (`<runtime> image inspect`). A gang's
members run on other nodes than its head: each must hold the image, and the same content
under that tag, or the boot would serve two vLLM builds while its row records the head's.

Not the runtime's local id: that is the digest of the whole config, creation time and labels
included, so one image imported on each node from copies of one tar (the copies' times
differ), or built with a build label, gets another id on every node while its content is the
same. Layers are compared by content: another build of the same files differs (its files'
times), as it may in what it holds."""

from __future__ import annotations

import hashlib
import json
import subprocess

from bench.experiment.spec import ContainerSpec

INSPECT_TIMEOUT_S = 60.0
IMAGE_DIFFERS = "another image under"  # how a member's mismatch is said (the loop reads it)
_CONTENT = "{{json .RootFS.Layers}}\t{{json .Config}}"
_RUNS_WITH = ("Env", "Entrypoint", "Cmd", "WorkingDir", "User")  # of the image's config


def content_digest(layers: list[str], config: dict[str, object] | None) -> str:
    """`sha256:<hex>` over the layers' diff ids and what of the config a container runs with."""
    runs_with = {k: (config or {}).get(k) for k in _RUNS_WITH}
    body = json.dumps({"layers": layers, "config": runs_with}, sort_keys=True)
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def image_id(c: ContainerSpec) -> str | None:
    """The image's content on this node (`content_digest`; None: the runtime does not have it
    here, or does not answer). Never pulls."""
    cmd = [c.runtime, "image", "inspect", "--format", _CONTENT, c.image]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = out.stdout.strip().splitlines()
    if out.returncode != 0 or not found:
        return None
    layers, _, config = found[0].partition("\t")
    try:
        parsed_layers, parsed_config = json.loads(layers), json.loads(config or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(parsed_layers, list) or not parsed_layers:
        return None
    if not isinstance(parsed_config, dict):
        parsed_config = None
    return content_digest([str(x) for x in parsed_layers], parsed_config)


def differs(c: ContainerSpec, node: str, mine: str, head: str) -> str:
    """One line: this node holds other content under the arm's image reference."""
    return (
        f"{IMAGE_DIFFERS} {c.image} on node {node}: {mine[:19]}, the head's is {head[:19]} "
        f"(a stale pull): `{c.runtime} pull {c.image}` (or load the same image) on every node"
    )
