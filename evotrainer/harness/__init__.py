"""The harness: named bounded parameters <-> a normalised vector, and the CMA-ES searcher over it."""

from evotrainer.harness.cma_search import NONFINITE_FALLBACK, CMASearch
from evotrainer.harness.space import (
    KINDS,
    Harness,
    HarnessParam,
    HarnessSpace,
    ema_toward,
    space_from_specs,
    weights_to_logits,
)

__all__ = ["KINDS", "NONFINITE_FALLBACK", "CMASearch", "Harness", "HarnessParam", "HarnessSpace",
           "ema_toward", "space_from_specs", "weights_to_logits"]
