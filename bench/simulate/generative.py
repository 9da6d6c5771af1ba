"""The generative model of simulated results (docs/statistics.md), vectorized over replicates
(count arrays, no rows).

For arm a, boot b, prompt p, draft position k the conditional acceptance is
    q = logistic(mu_k + delta_a + beta_ab + gamma_p + (delta gamma)_ap + eps_bp)
with beta ~ N(0, sigma_boot^2) nested in arm (Student t scaled to the same SD when
`boot_df` is set: heavy-tailed boot effects; times `arm_boot_scale[a]`: unequal variances
between arms), gamma ~ N(0, sigma_prompt^2) shared by every arm and boot, eps ~ N(0,
sigma_res^2) per boot x prompt. Output length L_p is lognormal around 256 tokens, times a
per-boot work multiplier m_ab (lognormal with `work_sigma`; `work_outlier` x for boot 0 of
every arm): unequal work per boot. D = max(1, round(m L_p / (1 + sum_k prod_{j<=k} q_j)));
A_0 ~ Bin(D, q_0), A_k ~ Bin(A_{k-1}, q_k) (cumulative, as vLLM counts them).

Speed: prompt p completes C_p = round(L_p) tokens in every arm and boot (same text); its
latency is C_p * seconds_per_token / f_a * exp(eta_ab + e_abp) with f_a the arm's speed
factor, eta ~ N(0, sigma_speed_boot^2) per boot (Student t with `speed_boot_df`) and
e ~ N(0, sigma_speed_probe^2) per probe. A boot's tokens/s is sum C / sum latency; the true
ratio of two arms' geometric-mean tokens/s is f_j / f_i exactly (the rest is shared).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

DEFAULT_MU = (1.65, 1.33, 1.33, 1.33)
F = NDArray[np.float64]


@dataclass(frozen=True)
class SimParams:
    """Parameters of the generative model (defaults give pos0 ~0.78, mean length ~3.19)."""

    mu: tuple[float, ...] = DEFAULT_MU
    sigma_boot: float = 0.03
    sigma_prompt: float = 0.8
    sigma_res: float = 0.15
    sigma_interaction: float = 0.0  # arm x prompt interaction (delta gamma)_ap
    length_median: float = 256.0
    length_sigma: float = 0.5
    boot_seconds: float = 30.0  # cost of one boot, for `specab plan`
    seconds_per_token: float = 0.01  # probe latency per completion token
    work_sigma: float = 0.0  # SD of log work multipliers per boot (unequal work)
    work_outlier: float = 1.0  # boot 0 of every arm runs this many times the work
    boot_df: float | None = None  # Student t boot effects with this df (heavy tails)
    arm_boot_scale: tuple[float, ...] | None = None  # sigma_boot multiplier per arm
    sigma_speed_boot: float = 0.05  # SD of log latency between boots (shared-CPU-like noise)
    sigma_speed_probe: float = 0.1  # SD of log latency between probes of one boot
    speed_boot_df: float | None = None  # Student t speed boot effects (heavy tails)
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def positions(self) -> int:
        return len(self.mu)


def mu_for(positions: int) -> tuple[float, ...]:
    """The default mu extended (or cut) to `positions` draft positions."""
    return tuple(DEFAULT_MU[min(k, len(DEFAULT_MU) - 1)] for k in range(positions))


@dataclass(frozen=True)
class PromptSet:
    """A fixed probe set: prompt effects gamma (P,), output lengths (P,), arm x prompt
    interaction (arms, P)."""

    gamma: NDArray[np.float64]
    length: NDArray[np.float64]
    interaction: NDArray[np.float64]


def draw_prompt_set(
    rng: np.random.Generator, arms: int, prompts: int, params: SimParams = SimParams()
) -> PromptSet:
    return PromptSet(
        gamma=rng.normal(0.0, params.sigma_prompt, prompts),
        length=params.length_median * np.exp(rng.normal(0.0, params.length_sigma, prompts)),
        interaction=rng.normal(0.0, params.sigma_interaction, (arms, prompts)),
    )


def _logistic(x: NDArray[np.float64]) -> NDArray[np.float64]:
    out: NDArray[np.float64] = 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free
    return out


def boot_effects(
    rng: np.random.Generator, params: SimParams, shape: tuple[int, int, int]
) -> NDArray[np.float64]:
    """beta (R, arms, boots, 1): normal, or Student t scaled to the same SD."""
    if params.boot_df is None:
        z = rng.standard_normal(shape)
    else:
        nu = params.boot_df
        z = (
            rng.standard_t(nu, shape) * np.sqrt((nu - 2.0) / nu)
            if nu > 2
            else rng.standard_t(nu, shape)
        )
    scale = (
        np.ones(shape[1]) if params.arm_boot_scale is None else np.asarray(params.arm_boot_scale)
    )
    out: NDArray[np.float64] = (params.sigma_boot * scale[None, :, None] * z)[..., None]
    return out


def _work(
    rng: np.random.Generator, params: SimParams, shape: tuple[int, int, int]
) -> NDArray[np.float64]:
    """Per-boot work multipliers (R, arms, boots, 1)."""
    m = np.exp(rng.normal(0.0, params.work_sigma, shape)) if params.work_sigma else np.ones(shape)
    m[:, :, 0] *= params.work_outlier
    return m[..., None]


@dataclass(frozen=True)
class HeldFixed:
    """What the simulated experiments hold instead of drawing: `prompt_set`, reused by every
    replicate (the estimand of the primary interval: "on this probe set"), and `boot_shift`,
    a known logit shift per boot (arms, boots), e.g. the effect of the host it ran on."""

    prompt_set: PromptSet | None = None
    boot_shift: NDArray[np.float64] | None = None


def simulate_counts(
    rng: np.random.Generator,
    deltas: NDArray[np.float64] | list[float],
    boots: int,
    prompts: int,
    params: SimParams = SimParams(),
    replicates: int = 1,
    held: HeldFixed = HeldFixed(),
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Per-cell counts for `replicates` independent experiments.

    Returns (D, A, L): D drafts with shape (R, arms, boots, prompts), A cumulative accepted
    counts per position with shape (R, arms, boots, prompts, K), L output lengths (R, prompts).
    `held`: a probe set every replicate reuses (gamma, lengths, interaction) and a known
    logit shift per boot.
    """
    prompt_set, boot_shift = held.prompt_set, held.boot_shift
    d = np.asarray(deltas, dtype=np.float64)
    n_arms, k = d.size, params.positions
    shape = (replicates, n_arms, boots, prompts)
    if prompt_set is None:
        gamma = rng.normal(0.0, params.sigma_prompt, (replicates, 1, 1, prompts))
        inter = rng.normal(0.0, params.sigma_interaction, (replicates, n_arms, 1, prompts))
        length = params.length_median * np.exp(
            rng.normal(0.0, params.length_sigma, (replicates, prompts))
        )
    else:
        gamma = np.broadcast_to(prompt_set.gamma[None, None, None, :], (replicates, 1, 1, prompts))
        inter = np.broadcast_to(
            prompt_set.interaction[None, :, None, :], (replicates, n_arms, 1, prompts)
        )
        length = np.broadcast_to(prompt_set.length[None, :], (replicates, prompts))
    beta = boot_effects(rng, params, (replicates, n_arms, boots))
    eps = rng.normal(0.0, params.sigma_res, shape)
    lin = d[None, :, None, None] + beta + gamma + inter + eps
    if boot_shift is not None:
        lin = lin + np.asarray(boot_shift, dtype=np.float64)[None, :, :, None]
    mu = np.asarray(params.mu, dtype=np.float64)
    q = _logistic(lin[..., None] + mu)  # (R, A, B, P, K)
    expected_per_draft = 1.0 + np.cumprod(q, axis=-1).sum(axis=-1)
    work = _work(rng, params, (replicates, n_arms, boots)) * length[:, None, None, :]
    drafts = np.maximum(1, np.rint(work / expected_per_draft)).astype(np.int64)
    acc = np.empty((*shape, k), dtype=np.int64)
    prev = drafts
    for j in range(k):
        prev = rng.binomial(prev, q[..., j])
        acc[..., j] = prev
    return drafts, acc, length


def simulate_boot_totals(
    rng: np.random.Generator,
    deltas: NDArray[np.float64] | list[float],
    boots: int,
    prompts: int,
    params: SimParams = SimParams(),
    replicates: int = 1,
    chunk: int = 200,
    held: HeldFixed = HeldFixed(),
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Boot totals only, for calibration: D (R, arms, boots), A (R, arms, boots, K).

    Replicates are generated in chunks so memory stays bounded.
    """
    d_parts, a_parts = [], []
    for start in range(0, replicates, chunk):
        n = min(chunk, replicates - start)
        drafts, acc, _ = simulate_counts(rng, deltas, boots, prompts, params, n, held)
        d_parts.append(drafts.sum(axis=3))
        a_parts.append(acc.sum(axis=3))
    return np.concatenate(d_parts), np.concatenate(a_parts)


def _t_or_normal(rng: np.random.Generator, df: float | None, shape: tuple[int, ...]) -> F:
    """Unit-SD draws: normal, or Student t scaled to SD 1 (df > 2)."""
    if df is None:
        return rng.standard_normal(shape)
    z: F = rng.standard_t(df, shape)
    return z * np.sqrt((df - 2.0) / df) if df > 2 else z


def simulate_latency(
    rng: np.random.Generator,
    factors: NDArray[np.float64] | list[float],
    boots: int,
    completion: NDArray[np.float64],
    params: SimParams = SimParams(),
) -> F:
    """Latency (R, arms, boots, P) of completions (R, P) at per-arm speed factors."""
    f = np.asarray(factors, dtype=np.float64)
    r, p = completion.shape
    eta = params.sigma_speed_boot * _t_or_normal(rng, params.speed_boot_df, (r, f.size, boots, 1))
    eps = rng.normal(0.0, params.sigma_speed_probe, (r, f.size, boots, p))
    base = completion[:, None, None, :] * params.seconds_per_token / f[None, :, None, None]
    out: F = base * np.exp(eta + eps)
    return out


def simulate_speed_totals(
    rng: np.random.Generator,
    factors: NDArray[np.float64] | list[float],
    boots: int,
    prompts: int,
    params: SimParams = SimParams(),
    replicates: int = 1,
) -> tuple[F, F]:
    """Boot totals for calibration: completion tokens and latency, each (R, arms, boots)."""
    length = params.length_median * np.exp(
        rng.normal(0.0, params.length_sigma, (replicates, prompts))
    )
    completion = np.maximum(1.0, np.rint(length))
    lat = simulate_latency(rng, factors, boots, completion, params)
    n_arms = np.asarray(factors).size
    tokens = np.broadcast_to(completion.sum(axis=1)[:, None, None], (replicates, n_arms, boots))
    return tokens.copy(), lat.sum(axis=3)
