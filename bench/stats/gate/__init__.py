"""The regression gate against a stored, trusted reference (`specab gate`): its statistics
(`noninferiority`: one-sided Welch bounds on boot values, calibrated by simulation), what a
reference stores per arm (`reference_body`) and its rules (`pairing`: arm pairs,
comparability, the checks of each pair). Pure: the store reads and writes references."""

from bench.stats.gate.noninferiority import boots_for_gate, gate_bounds, gate_check, gate_verdicts
from bench.stats.gate.pairing import gate
from bench.stats.gate.reference_body import check_saveable, reference_arms

__all__ = [
    "boots_for_gate", "check_saveable", "gate", "gate_bounds", "gate_check", "gate_verdicts",
    "reference_arms",
]  # fmt: skip
