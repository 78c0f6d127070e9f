"""Neighbours in the metric the model learnt: coordinates divided by the learnt lengthscales.

:func:`learn_metric` runs short warm-up fits and rescales every axis by its inverse lengthscale
(geometric mean over channels); the engine then models ``(x - offset) * scale`` (see
docs/design-decisions.md, "Learnt metric: the warm-up").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .config import GPVAEConfig

__all__ = ["axis_scales", "learn_metric", "warmup_epochs", "warmup_rounds", "uses_learnt_metric", "warm_lengthscales", "spread", "WARMUP_STEPS", "WARMUP_SHARE",
           "WARMUP_ROUNDS", "MIN_RATIO", "ROUND_GROWTH"]

#: optimiser steps of each warm-up round at most ...
WARMUP_STEPS = 250
#: ... and at most this share of the fit's own steps
WARMUP_SHARE = 1 / 16
#: warm-up rounds (each re-selects the neighbours in the metric learnt so far)
WARMUP_ROUNDS = 3
#: the learnt metric is used when its axes differ from the starting ones by more than this factor
MIN_RATIO = 3.0
#: the remaining rounds are skipped unless, each moving the axes this many times as far, they reach MIN_RATIO
ROUND_GROWTH = 2.0


def axis_scales(lengthscale: np.ndarray) -> np.ndarray:
    """The factor that puts every axis in units of its learnt lengthscale.

    Parameters
    ----------
    lengthscale : array, shape (L, D)
        Lengthscales of the L latent channels along the D axes (coordinate units).

    Returns
    -------
    ndarray, shape (D,)
        ``1 / geometric mean over channels`` of each axis's lengthscale (inverse coordinate units).
    """
    ls = np.asarray(lengthscale, dtype=float)
    if ls.ndim == 1:
        ls = ls[None, :]
    if ls.ndim != 2 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
        raise ValueError(f"lengthscales must be a positive (L, D) array, got {lengthscale!r}")
    return np.exp(-np.log(ls).mean(0))


def spread(scale: np.ndarray) -> float:
    """How far apart a metric puts the axes: the largest over the smallest axis factor (>= 1)."""
    scale = np.asarray(scale, dtype=float)
    return float(scale.max() / scale.min())


def _may_reach(total: np.ndarray, step: np.ndarray, remaining: int, min_ratio: float) -> bool:
    """Whether ``remaining`` rounds, each :data:`ROUND_GROWTH` times the last ``step``, pass ``min_ratio``."""
    return spread(total * step ** (ROUND_GROWTH * remaining)) > min_ratio


def warmup_epochs(config: GPVAEConfig, n_points: int, steps: int | None = None) -> int:
    """Epochs of one warm-up round (at least one): ``steps``, by default :data:`WARMUP_STEPS`.

    But at most :data:`WARMUP_SHARE` of the fit's own steps.
    """
    per_epoch = math.ceil(n_points / config.batch_for(n_points))
    if steps is None:
        steps = min(WARMUP_STEPS, WARMUP_SHARE * config.n_epochs(n_points) * per_epoch)
    return max(1, math.ceil(steps / per_epoch))


def warmup_rounds(config: GPVAEConfig, n_points: int) -> int:
    """Warm-up rounds to run: :data:`WARMUP_ROUNDS`, fewer where an explicit ``epochs`` cannot hold them.

    The rounds together (each :func:`warmup_epochs` long) never train more epochs than an
    explicit ``epochs`` budget.
    """
    if config.epochs is None:
        return WARMUP_ROUNDS
    return min(WARMUP_ROUNDS, config.epochs // warmup_epochs(config, n_points))


def uses_learnt_metric(config: GPVAEConfig, n_dims: int) -> bool:
    """Whether :func:`learn_metric` runs: more than one axis, a built-in kernel, neighbours."""
    return n_dims > 1 and isinstance(config.kernel, str) and config.neighbours > 0


def warm_lengthscales(ls: np.ndarray | None, n_dims: int) -> np.ndarray | None:
    """The (L, D) lengthscales a warm-up fit learnt, checked; None when it has none per axis.

    Raises
    ------
    FloatingPointError
        The warm-up diverged (lengthscales not finite and positive).
    """
    if ls is None:
        return None
    if not np.all(np.isfinite(ls)) or np.any(ls <= 0):
        raise FloatingPointError(
            f"training diverged in the warm-up that learns the metric (lengthscales "
            f"{np.array2string(ls.ravel()[:4], precision=3)}); try a smaller lr or dtype='float64'"
        )
    return ls if ls.ndim == 2 and ls.shape[1] == n_dims else None


def learn_metric(
    warm_fit: Callable[[np.ndarray, np.ndarray], np.ndarray | None], x: np.ndarray, y: np.ndarray,
    observed: np.ndarray, *, rounds: int = WARMUP_ROUNDS, min_ratio: float = MIN_RATIO,
    trace: list[float] | None = None, progress: bool | str = False,
) -> np.ndarray:
    """Per-axis factors of the learnt metric, or ones when it is close to the given one.

    Parameters
    ----------
    warm_fit : callable
        ``warm_fit(x, values)`` (values NaN where missing) returns the latent lengthscales (L, D) or None.
    x : array, shape (N, D)
        Centred coordinates (model units).
    y : array, shape (N, K)
        Standardised values (anything where not observed).
    observed : array of bool, shape (N, K)
    rounds : int
    min_ratio : float
        Keep the coordinates unless two axes are rescaled apart by more than this (:func:`spread`).
    trace : list, optional
        Receives the :func:`spread` of the metric after each round that ran.
    progress : bool or str
        Where the rounds are announced.

    Returns
    -------
    ndarray, shape (D,)
        Factors to multiply the coordinates with (inverse coordinate units).
    """
    from .progress import Progress, shown_here

    values = np.where(observed, y, np.nan)
    total = np.ones(x.shape[1])
    if rounds < 1:
        return total
    # said on the log, so that the first minute of a large fit is not silent
    with Progress(shown_here(progress), rounds, "metric warm-up", unit="rounds") as bar:
        for done in range(1, rounds + 1):
            ls = warm_lengthscales(warm_fit(x * total, values), x.shape[1])
            if ls is None:
                return np.ones(x.shape[1])
            step = axis_scales(ls)
            total = total * step
            if trace is not None:
                trace.append(spread(total))
            if not _may_reach(total, step, rounds - done, min_ratio):
                break
            if done < rounds:
                bar.update(done, f"axes {spread(total):.3g}x apart")
        kept = spread(total) <= min_ratio
        bar.update(rounds, f"{'coordinates kept' if kept else 'metric learnt'}: axes {spread(total):.3g}x "
                           f"apart after {done} round{'s' if done != 1 else ''}")
    if spread(total) <= min_ratio:
        return np.ones(x.shape[1])
    return total


def saved_scale(state: dict) -> np.ndarray | float:
    """The axis factors of a saved engine state (1.0 for states saved before they existed)."""
    scale = state.get("x_scale")
    return 1.0 if scale is None else scale.numpy().astype(np.float64)
