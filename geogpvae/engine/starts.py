"""Starting value of the latent lengthscales: the median distance to the H-th nearest location."""

from __future__ import annotations

import numpy as np

from ..gp.neighbours import median_neighbour_distance

__all__ = ["start_lengthscale"]


def start_lengthscale(x: np.ndarray, neighbours: int, backend: str = "auto") -> float:
    """The default start of every latent lengthscale.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Locations, model units.
    neighbours : int
        H.
    backend : str

    Returns
    -------
    float
        Units of ``x``; the largest extent of ``x`` where that distance is 0.
    """
    n = x.shape[0]
    start = median_neighbour_distance(x, max(1, min(neighbours, n - 1)), backend=backend)
    if not np.isfinite(start) or start <= 0:
        start = float(np.ptp(x, axis=0).max()) or 1.0
    return float(start)
