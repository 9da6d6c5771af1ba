"""A gang boot's flags: one server over several nodes ([resources] nodes) runs vLLM's mp
backend with flags specab sets per member; its world size must split evenly over them."""

from __future__ import annotations

from collections.abc import Mapping

from bench.errors import SpecabError

GANG_FLAGS = ("nnodes", "node-rank", "master-addr", "master-port", "headless")


def check_gang(
    name: str, spec_file: str, nodes: int, args: Mapping[str, object], sizes: Mapping[str, int]
) -> None:
    """A gang boot's world size must split evenly over its nodes; its flags are specab's."""
    if nodes < 2:
        return
    where = f"arms({name}).args"
    for flag in GANG_FLAGS:
        if flag in args:
            raise SpecabError(
                f"flag {flag!r} is set by specab for gang boots",
                file=spec_file or None,
                field=where,
                fix="remove it; [resources] nodes chooses the gang",
            )
    backend = args.get("distributed-executor-backend")
    if backend not in (None, False, "mp"):
        raise SpecabError(
            f"a gang boot runs vLLM's mp backend across nodes, not {backend!r}",
            file=spec_file or None,
            field=f"{where}.distributed-executor-backend",
            fix="remove the flag (specab passes --distributed-executor-backend mp)",
        )
    world = sizes.get("tp", 1) * sizes.get("pp", 1)  # one engine's ranks, over the gang
    if world % nodes:
        raise SpecabError(
            f"[resources] nodes = {nodes} must divide the server's world size "
            f"(tensor x pipeline parallel = {world})",
            file=spec_file or None,
            field=f"{where}.tensor-parallel-size",
            fix=f"set tensor-parallel-size = {nodes} (one rank per node) or a multiple",
        )
