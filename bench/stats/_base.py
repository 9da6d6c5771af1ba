"""Shared building blocks of the analysis models: finite-or-null numbers, plain ints, the
closed immutable base model."""

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


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
