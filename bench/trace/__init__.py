"""`specab trace` (docs/trace.md): where a served drafter departs from its reference forward.
The layers, each importing only the ones before it: `name_maps` (which reference module
computes each traced tensor, built in per forward), `tensor_diff` (pure: the comparison in
forward order, the first divergence, the verdict), `config_fields` (each side's resolved
geometry), `trace_plan` (the inputs checked, nothing written), `compare_steps` (the answer
from the trace's files) and `trace_run` (the boot with the capture patch, the replay in the
reference's interpreter, `trace.json`)."""

from bench.trace.config_fields import config_fields, config_said
from bench.trace.name_maps import forward_order
from bench.trace.tensor_diff import first_divergence, step_pairs, tensor_diffs, verdict
from bench.trace.trace_plan import TraceAsk, plan_trace
from bench.trace.trace_run import run_trace

__all__ = [
    "TraceAsk", "config_fields", "config_said", "first_divergence", "forward_order", "plan_trace",
    "run_trace", "step_pairs", "tensor_diffs", "verdict",
]  # fmt: skip
