"""Which observed values stand in for the missing ones when a fit scores itself.

Where a variable's gaps cluster (:func:`clustered_gaps`) its check values are held out in gaps
of the same shape (:func:`matched_entries`) and weighted by :func:`task_weights`; elsewhere a
random share (see docs/design-decisions.md, "Held-out values shaped like the gaps").
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..gp.neighbours import knn
from .check_values import check_entries

__all__ = ["task_weights", "clustered_gaps", "matched_entries", "held_out", "CLUSTER_MARGIN"]

#: gaps cluster when their share of *deep* missing values exceeds chance's by more than this
CLUSTER_MARGIN = 0.1


def task_weights(observed: np.ndarray) -> np.ndarray:
    """Each variable's share of the values to impute.

    Parameters
    ----------
    observed : array of bool, shape (N, K)

    Returns
    -------
    ndarray, shape (K,)
        Missing values of each variable over all missing values; ``1 / K`` when none is missing.
    """
    observed = np.asarray(observed, dtype=bool)
    missing = (~observed).sum(0).astype(float)
    if missing.sum() == 0:
        return np.full(observed.shape[1], 1.0 / observed.shape[1])
    return missing / missing.sum()


def _nearest(points: np.ndarray, query: np.ndarray, backend: str) -> np.ndarray:
    """Distance from every query location to its nearest point."""
    dist, _ = knn(points, 1, query=query, backend=backend)
    return dist[:, 0]


def _deep_share(x: np.ndarray, missing: np.ndarray, d_loc: np.ndarray, backend: str) -> float:
    """Share of ``missing`` rows whose nearest observed row is over 1.5 times their nearest location."""
    gaps = np.flatnonzero(missing)
    if gaps.size == 0 or gaps.size == missing.size:
        return 0.0
    d_gap = _nearest(x[~missing], x[gaps], backend)
    return float(np.mean(d_gap > 1.5 * d_loc[gaps]))


def clustered_gaps(x: np.ndarray, observed: np.ndarray, *, seed: int, backend: str = "auto",
                   margin: float = CLUSTER_MARGIN, max_points: int = 50000) -> np.ndarray:
    """Which variables have their missing values in clusters (outages) rather than scattered.

    Parameters
    ----------
    x : array, shape (N, D)
    observed : array of bool, shape (N, K)
    seed : int
        Seed of the random comparison and subsample.
    backend : {"auto", "kdtree", "faiss"}
    margin : float
        How far above chance the share of *deep* missing values (none observed nearby) must be.
    max_points : int
        Larger fields are judged on a random subsample of locations.

    Returns
    -------
    ndarray of bool, shape (K,)
        True where that share beats the same number of values missing at random by ``margin``.
    """
    x = np.asarray(x, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    rng = np.random.default_rng([int(seed), 4343])
    if len(x) > max_points:
        keep = rng.choice(len(x), max_points, replace=False)
        x, observed = x[keep], observed[keep]
    d_loc, _ = knn(x, 1, exclude_self=True, backend=backend)
    d_loc = d_loc[:, 0]
    out = np.zeros(observed.shape[1], dtype=bool)
    for j in range(observed.shape[1]):
        missing = ~observed[:, j]
        actual = _deep_share(x, missing, d_loc, backend)
        if actual > margin:
            out[j] = actual > _deep_share(x, rng.permutation(missing), d_loc, backend) + margin
    return out


def _gaps(points: np.ndarray, radii: np.ndarray, take: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of at least ``take`` points (or all): balls of ``radii`` around random points."""
    tree = cKDTree(points)
    held = np.zeros(len(points), dtype=bool)
    count = 0
    for centre, radius in zip(rng.permutation(len(points)), radii):
        if held[centre]:
            continue
        ball = np.asarray(tree.query_ball_point(points[centre], np.nextafter(radius, 0.0)), dtype=np.int64)
        fresh = np.union1d(ball[~held[ball]], [centre])
        held[fresh] = True
        count += fresh.size
        if count >= take:
            break
    return np.flatnonzero(held)


def matched_entries(
    x: np.ndarray,
    observed: np.ndarray,
    fraction: float,
    *,
    seed: int,
    max_values: int = 20000,
    min_left: int = 10,
    backend: str = "auto",
    shaped: np.ndarray | None = None,
) -> np.ndarray:
    """Observed values to hold out, shaped like the values to impute.

    Parameters
    ----------
    x : array, shape (N, D)
        Locations (model coordinates).
    observed : array of bool, shape (N, K)
    fraction : float
        Share of each scored variable's observed values held out (0 holds out nothing).
    seed : int
    max_values : int
        At most this many values in all.
    min_left : int
        Values each variable keeps (all where it has fewer than twice as many).
    backend : {"auto", "kdtree", "faiss"}
    shaped : array of bool, shape (K,), optional
        The variables held out in gaps (default: all with missing values); the others at random.

    Returns
    -------
    ndarray of bool, shape (N, K)
        The held-out values. Gap radii follow the missing values' distances to the nearest
        observed value; variables with no missing values get none (unless none has any).
    """
    x = np.asarray(x, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    held = np.zeros_like(observed)
    if fraction <= 0:
        return held
    rng = np.random.default_rng([int(seed), 4242])
    scored = task_weights(observed) > 0
    budget = max(1, max_values // max(int(scored.sum()), 1))
    for j in np.flatnonzero(scored):
        rows = np.flatnonzero(observed[:, j])
        if rows.size < 2 * min_left:
            continue
        take = min(round(fraction * rows.size), rows.size - min_left, budget)
        if take <= 0:
            continue
        gaps = np.flatnonzero(~observed[:, j])
        if gaps.size == 0 or (shaped is not None and not shaped[j]):  # a random share
            held[rng.choice(rows, take, replace=False), j] = True
            continue
        if gaps.size > 20000:  # enough to know the distances' distribution
            gaps = rng.choice(gaps, 20000, replace=False)
        d_gap = _nearest(x[rows], x[gaps], backend)
        picked = _gaps(x[rows], rng.choice(d_gap, rows.size), take, rng)
        if picked.size > rows.size - min_left:  # a last large gap: keep min_left values
            picked = rng.choice(picked, rows.size - min_left, replace=False)
        held[rows[picked], j] = True
    return held


def held_out(
    x: np.ndarray, observed: np.ndarray, fraction: float, *, seed: int, shaped: bool | np.ndarray = True,
    backend: str = "auto",
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The check values of a fit and the weights of their score.

    Parameters
    ----------
    x : array, shape (N, D)
    observed : array of bool, shape (N, K)
    fraction : float
        Share of the observed values held out (0: none).
    seed : int
    shaped : bool or array of bool, shape (K,)
        Variables held out in gaps (:func:`matched_entries`, weighted by :func:`task_weights`);
        none: a random share of every variable, equally weighted.
    backend : {"auto", "kdtree", "faiss"}

    Returns
    -------
    check : ndarray of bool, shape (N, K), or None
        None when nothing is held out.
    weights : ndarray, shape (K,), or None
        None for equal weights.
    """
    if fraction <= 0:
        return None, None
    shaped = np.broadcast_to(np.asarray(shaped, dtype=bool), observed.shape[1:])
    if shaped.any():
        check = matched_entries(x, observed, fraction, seed=seed, backend=backend, shaped=shaped)
        weights = task_weights(observed)
    else:
        check, weights = check_entries(observed, fraction, seed=seed), None
    return (check if check.any() else None), weights
