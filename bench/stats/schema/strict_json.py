"""Shared building blocks of the statistics' models: finite-or-null numbers (`Num`: NaN and
infinities become null, so every dump is strict JSON), plain ints from numpy ones (`Int`),
and the closed immutable base model (`Frozen`)."""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else None


Num = Annotated[float | None, BeforeValidator(_finite)]


def _int(x: Any) -> Any:
    return int(x) if isinstance(x, np.integer) else x


Int = Annotated[int, BeforeValidator(_int)]


class Frozen(BaseModel):
    """Immutable, and no field that is not declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)
