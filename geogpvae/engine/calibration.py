"""Variance calibration from held-out values: which values to hide, and the factors.

After training, :meth:`geogpvae.engine.core.GPVAEEngine._calibrate` hides observed values
a few times over, predicts them from the rest and collects their standardised errors,
separately for two *regimes*: targets that keep observed values of their own and targets
that keep none. This module holds the NumPy side of that: drawing the values to hide, and
turning the collected errors into variance factors and a choice of latent source.
"""

from __future__ import annotations

import numpy as np

__all__ = ["REGIMES", "choose_factors", "hide_values", "regime_factors"]

#: the two calibration regimes: locations with observed values of their own, and without
REGIMES = ("observed", "unobserved")

#: fewer held-out values than this keep factor 1 (or borrow the other regime's factor)
MIN_VALUES = 20

#: per (regime, source): per variable, lists of squared z-scores and of log variances
Stats = dict[tuple[str, str], tuple[list[list[np.ndarray]], list[list[np.ndarray]]]]


def hide_values(
    observed: np.ndarray, rng: np.random.Generator, fraction: float, whole: float, max_targets: int,
    values: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The values hidden in one round and the rows to predict.

    Parameters
    ----------
    observed : array of bool, shape (N, K)
    rng : numpy.random.Generator
    fraction : float
        Share of the observed values hidden one by one.
    whole : float
        Share of the locations whose observed values are all hidden.
    max_targets : int
        At most this many rows are predicted (a random subset, in order).
    values : array of bool, shape (N, K), optional
        The values hidden one by one (e.g. in gaps shaped like the missing values:
        :func:`geogpvae.engine.holdout.matched_entries`); by default a random ``fraction``.

    Returns
    -------
    hide : array of bool, shape (N, K)
        Never every observed value of a variable.
    rows : array of int
        Sorted rows with a hidden value.
    """
    hide = observed & (rng.random(observed.shape) < fraction) if values is None else observed & values
    hide |= observed & (rng.random(observed.shape[0]) < whole)[:, None]
    for j in range(observed.shape[1]):  # never hide every observed value of a variable
        if hide[:, j].sum() >= observed[:, j].sum():
            hide[np.flatnonzero(hide[:, j])[0], j] = False
    rows = np.flatnonzero(hide.any(1))
    if rows.size > max_targets:
        rows = np.sort(rng.choice(rows, max_targets, replace=False))
    return hide, rows


def regime_factors(sq: list[list[np.ndarray]], lv: list[list[np.ndarray]]) -> tuple[np.ndarray, float | None]:
    """Variance factors (K,) of one regime and source, and their mean calibrated NLL.

    A variable's factor is the mean of its squared standardised errors (the factor that
    minimises the Gaussian negative log-likelihood of its held-out values) when it has at
    least :data:`MIN_VALUES` of them, else 1. The NLL averages, over the variables with any
    held-out value, the Gaussian negative log-likelihood of their errors under the
    calibrated variance; None when no variable has one.
    """
    k = len(sq)
    f, nll, n_used = np.ones(k), 0.0, 0
    for j in range(k):
        vals = np.concatenate(sq[j]) if sq[j] else np.empty(0)
        if vals.size >= MIN_VALUES:
            f[j] = float(np.mean(vals))
        if vals.size:
            logv = np.concatenate(lv[j])
            nll += float(np.mean(0.5 * (np.log(2 * np.pi) + logv + np.log(f[j])) + 0.5 * vals / f[j]))
            n_used += 1
    return f, (nll / n_used if n_used else None)


def choose_factors(
    stats: Stats, candidates: dict[str, list[str]]
) -> tuple[np.ndarray, dict[str, str], dict[str, float]]:
    """The factors, the source of each regime with the lowest calibrated NLL, and the NLLs.

    Parameters
    ----------
    stats : dict
        ``stats[(regime, source)] = (sq, lv)``: per variable, lists of squared standardised
        errors and of log predictive variances (uncalibrated).
    candidates : dict
        The sources scored in each regime; the first wins when none has a score.

    Returns
    -------
    factors : ndarray, shape (2, K)
        Row 0 for locations with observed values, row 1 without. A variable whose factor
        stayed 1 in one regime borrows the other regime's.
    chosen : dict
        The source of each regime.
    nll : dict
        The mean calibrated NLL of every scored ``"regime:source"``.
    """
    k = len(next(iter(stats.values()))[0])
    factors = np.ones((2, k))
    chosen: dict[str, str] = {}
    scores: dict[str, float] = {}
    for r_i, regime in enumerate(REGIMES):
        best, best_nll = candidates[regime][0], np.inf
        for mode in candidates[regime]:
            f, nll = regime_factors(*stats[(regime, mode)])
            if nll is None:
                continue
            scores[f"{regime}:{mode}"] = nll
            if nll < best_nll:
                best, best_nll, factors[r_i] = mode, nll, f
        chosen[regime] = best
    for j in range(k):  # a regime without enough held-out values borrows the other's factor
        for r_i in range(2):
            if factors[r_i, j] == 1.0 and factors[1 - r_i, j] != 1.0:
                factors[r_i, j] = factors[1 - r_i, j]
    return factors, chosen, scores
