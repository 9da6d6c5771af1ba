"""One boot attempt as the driver fixes it before the launch (`Attempt`: arm, boot, attempt
number, launch order, block, host, log path), shared by the driver that numbers it and the
boot that records it. The rule that numbers attempts is the driver's `Ledger`."""

from __future__ import annotations

from dataclasses import dataclass

from bench.records import boot_file_stem


@dataclass(frozen=True)
class Attempt:
    """The driver's columns of one boot attempt, fixed before it launches."""

    arm: str
    boot: int  # 0-based within the arm
    number: int  # the `attempt` column, from 1
    order: int  # global launch order
    block: int  # interleaving block
    host: str  # node label (unique within the run)
    log_path: str  # the server log, relative to the results dir
    member_hosts: tuple[str, ...] = ()  # a gang boot: every member's node label, head first
    slot: int | None = None  # which of its node's slots (the driver's index; a gang: the head's)

    @property
    def boot_id(self) -> str:
        return boot_file_stem(self.arm, self.boot, self.number)

    def hosts(self, nodes: int) -> tuple[str, ...]:
        """Every member's node of a `nodes`-node boot, head first: the driver's placement,
        else (`specab boot`, all members on one machine) this host for all; () if nodes = 1."""
        if nodes == 1:
            return ()
        return self.member_hosts if len(self.member_hosts) == nodes else (self.host,) * nodes
