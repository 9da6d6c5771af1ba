"""The one writer of a results directory: `claim.json`, written by the driver that holds it
(`bench.store.writer_claim`) and read by every other driver (which refuses), by `status`
(who writes, and the boots in flight) and by a takeover. Additive to the results contract:
a directory without it is unclaimed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

CLAIM_FILE = "claim.json"
CLAIM_VERSION = 1


class InFlightBoot(BaseModel):
    """A boot attempt the holder has launched and not yet recorded."""

    model_config = ConfigDict(extra="allow", frozen=True)

    boot_id: str = Field(description="The attempt's id (its boot row's name when it lands).")
    arm: str = Field(description="Arm.")
    boot: int = Field(description="0-based boot index within the arm.")
    attempt: int = Field(description="Attempt number of this boot.")
    host: str = Field(description="Node (label) the attempt runs on; a gang boot: its head.")
    started_at: str = Field(description="When it was launched (UTC, ISO 8601).")


class WriterClaim(BaseModel):
    """Who writes this results directory now, and the heartbeat that proves it still does."""

    # keys a newer release adds are kept, not refused: the file is part of an additive
    # contract that an older specab (or `status` on a login node) may read
    model_config = ConfigDict(extra="allow", frozen=True)

    claim_version: int = Field(CLAIM_VERSION, description="Version of this record.")
    token: str = Field(description="Random id of this claim; a boot is recorded only under it.")
    host: str = Field(description="Hostname of the holder (its UTS name).")
    pid: int = Field(description="Process id of the holding driver on `host`.")
    pid_started: int | None = Field(
        None, description="The holder's start time in clock ticks since boot (/proc), so a "
        "reused PID is not mistaken for the holder; None where /proc is absent."
    )  # fmt: skip
    command: str = Field(description="What holds it, e.g. `run-ab --resume`.")
    started_at: str = Field(description="When the claim was taken (UTC, ISO 8601).")
    heartbeat_at: str = Field(description="The holder's last heartbeat (UTC, ISO 8601).")
    took_over: str | None = Field(
        None, description="The stale claim this one replaced: `host pid since` of its holder."
    )
    in_flight: list[InFlightBoot] = Field(
        default_factory=list, description="Attempts launched and not yet recorded (additive)."
    )
    slurm_job: str | None = Field(
        None, description="SLURM_JOB_ID of the holder's batch job, if any (additive)."
    )
    slurm_restart: int = Field(
        0, description="SLURM_RESTART_COUNT of that job when the claim was taken (additive)."
    )
