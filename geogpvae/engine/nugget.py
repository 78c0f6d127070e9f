"""A data-driven starting value of the likelihood variance: the variogram nugget near distance 0.

Semivariances ``(y_i - y_j)^2 / 2`` of each observed value with its nearest observed neighbours;
a least-squares line against distance gives the nugget at 0 (see docs/design-decisions.md).
"""

from __future__ import annotations

import numpy as np

from ..gp.neighbours import knn

__all__ = ["NUGGET_BOUNDS", "nugget"]

#: Range of the starting likelihood variance (standardised units)
NUGGET_BOUNDS = (0.01, 0.5)


def nugget(
    x: np.ndarray,
    y: np.ndarray,
    observed: np.ndarray,
    *,
    k: int = 4,
    max_points: int = 20000,
    bounds: tuple[float, float] = NUGGET_BOUNDS,
    seed: int = 0,
    backend: str = "auto",
) -> np.ndarray:
    """Nugget of each variable, in the (standardised) units of ``y``.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Locations, model units.
    y : ndarray, shape (N, K)
        Standardised values, anything where missing.
    observed : ndarray of bool, shape (N, K)
    k : int
        Neighbours per value in the semivariance cloud.
    max_points : int
        At most this many values per variable (a random subset) enter the cloud.
    bounds : (float, float)
        The estimate is clipped to this range (units of ``y`` squared).
    seed : int
    backend : str

    Returns
    -------
    ndarray, shape (K,)
        Variance at distance 0; ``bounds[1]`` where a variable has too few observed values.
    """
    rng = np.random.default_rng(seed)
    out = np.full(y.shape[1], bounds[1])
    for j in range(y.shape[1]):
        rows = np.flatnonzero(observed[:, j])
        if rows.size < k + 2:
            continue
        pts, vals = x[rows], y[rows, j]
        query = np.arange(rows.size)
        if rows.size > max_points:
            query = rng.choice(rows.size, max_points, replace=False)
        dist, idx = knn(pts, k + 1, query=pts[query], backend=backend)
        dist, idx = dist[:, 1:], idx[:, 1:]  # drop the value itself (distance 0, first)
        ok = idx >= 0
        gamma = 0.5 * (vals[query][:, None] - vals[np.where(ok, idx, 0)]) ** 2
        d, g = dist[ok], gamma[ok]
        if d.size < 3 or np.ptp(d) == 0:
            est = float(np.mean(g))
        else:
            slope, intercept = np.polyfit(d, g, 1)
            est = float(intercept) if slope >= 0 else float(np.mean(g))
        out[j] = float(np.clip(est, *bounds))
    return out
