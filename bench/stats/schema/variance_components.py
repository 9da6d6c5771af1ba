"""Where the noise is (`analyze --json` `variance_components`): per arm and metric the
between-boot SD, binomial floor, crossed-ANOVA components and design effect; pooled over
arms for planning."""

from __future__ import annotations

from pydantic import Field

from bench.stats.schema.strict_json import Frozen, Int, Num


class ArmComponents(Frozen):
    between_boot_sd: Num = Field(description="SD of one boot of average work.")
    effective_boots: Num = Field(description="Kish effective boots.")
    binomial_floor_sd: Num = Field(None, description="sqrt(R(1-R)/mean D) (pos0 only).")
    overdispersion: Num = Field(None, description="(between-boot SD / binomial floor)^2.")
    sigma2_boot: Num = Field(description="Crossed ANOVA on cells: boot component.")
    sigma2_prompt: Num = Field(description="Prompt component.")
    sigma2_res: Num = Field(description="Residual (boot x prompt) component.")
    icc_boot: Num = Field(description="Boot share of the cell variance.")
    icc_prompt: Num = Field(description="Prompt share of the cell variance.")
    boot_se: Num = Field(description="Boot-level SE of the estimate.")
    naive_se: Num = Field(description="SE treating every cell as independent (wrong).")
    design_effect: Num = Field(description="(boot_se / naive_se)^2.")
    prompts: Int = Field(description="Prompts with drafts in every boot of the arm.")


class PooledComponents(Frozen):
    between_boot_sd: Num = Field(description="Pooled over arms (weights B_a - 1).")
    df: float = Field(description="Its degrees of freedom.")
    sigma2_boot: Num = Field(description="df-weighted mean of the arms' components.")
    sigma2_prompt: Num = Field(description="Likewise, prompt component.")
    sigma2_res: Num = Field(description="Likewise, residual component.")


class VarianceComponents(Frozen):
    per_arm: dict[str, dict[str, ArmComponents]] = Field(description="Arm -> metric -> parts.")
    pooled: dict[str, PooledComponents | None] = Field(description="Metric -> pooled parts.")
    units: str = Field(description="What the numbers are.")
