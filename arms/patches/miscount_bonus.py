"""A deliberately broken counter, for testing `specab selftest`: counts the bonus token.

A classic fork bug: a verify step's accepted count taken as "tokens emitted - 1" *before*
the rejection is applied, i.e. one more than vLLM accepted whenever a draft was rejected.
Both of vLLM's counters (the per-request metrics and the /metrics counters, built in the
engine core's scheduler) get the same wrong number, so every consistency check specab runs
on a boot still passes; only a comparison with known truth can catch it.
"""

from specab_patch import report_applied, when_imported

PATCH = "miscount_bonus"


def _plus_one(observe, accepted_key):
    def wrapped(self, *args, **kwargs):
        drafted = kwargs.get("num_draft_tokens", args[0] if args else 0)
        if accepted_key in kwargs:
            kwargs[accepted_key] = min(kwargs[accepted_key] + 1, drafted)
        else:
            args = (args[0], min(args[1] + 1, drafted), *args[2:])
        return observe(self, *args, **kwargs)

    return wrapped


def _patch_request(mod):
    cls = mod.RequestSpecDecodeMetrics
    cls.observe = _plus_one(cls.observe, "num_accepted")
    report_applied(PATCH, "RequestSpecDecodeMetrics.observe counts one more accepted")


def _patch_metrics(mod):
    cls = mod.SpecDecodingStats
    cls.observe_draft = _plus_one(cls.observe_draft, "num_accepted_tokens")
    report_applied(PATCH, "SpecDecodingStats.observe_draft counts one more accepted")


when_imported("vllm.v1.metrics.stats", _patch_request)
when_imported("vllm.v1.spec_decode.metrics", _patch_metrics)
