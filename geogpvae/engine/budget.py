"""The KL-weight selection's share of the training budget: plain numbers, no torch (the
command line's ``info`` estimates run times from them)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import GPVAEConfig

__all__ = ["KL_FACTORS", "MIN_SELECTION_EPOCHS", "SELECTION_HOLDOUT", "SELECTION_SHARE",
           "WHOLE_FIELD_SELECTION_SHARE", "selection_epochs", "selection_share"]

#: Candidate KL weights, as multiples of the engine's base weight (1 for SPA, N/H for HPA).
KL_FACTORS = (1.0, 0.2)
#: Share of the epoch budget each candidate trains for before the choice, with mini-batches
SELECTION_SHARE = 0.35
#: The same where every step takes the whole field
WHOLE_FIELD_SELECTION_SHARE = 0.2
#: The fewest epochs each candidate trains (fewer only where the budget leaves none after them).
MIN_SELECTION_EPOCHS = 3
#: Share of each variable's observed values held out to score the candidates.
SELECTION_HOLDOUT = 0.1


def selection_share(config: GPVAEConfig, n_points: int) -> float:
    """The share of the budget each candidate trains for on a field of ``n_points`` locations.

    Parameters
    ----------
    config : GPVAEConfig
    n_points : int

    Returns
    -------
    float
        :data:`WHOLE_FIELD_SELECTION_SHARE` for whole-field steps, else :data:`SELECTION_SHARE`.
    """
    whole = config.batch_for(n_points) >= n_points
    return WHOLE_FIELD_SELECTION_SHARE if whole else SELECTION_SHARE


def selection_epochs(total_epochs: int, share: float = SELECTION_SHARE) -> int:
    """Epochs each candidate trains: ``ceil(share * total_epochs)``, at least 1.

    And at least :data:`MIN_SELECTION_EPOCHS` where that leaves an epoch after them.
    """
    floor = min(MIN_SELECTION_EPOCHS, total_epochs - 1)
    return max(1, floor, math.ceil(share * total_epochs))
