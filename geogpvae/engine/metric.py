"""Neighbours in the metric the model learnt: coordinates divided by the learnt lengthscales.

The engine picks every neighbour set (the prior's conditioning sets, the encoder's context,
the GP conditional at prediction) by Euclidean distance in its coordinates. When the axes
carry different units that is an arbitrary choice: a station network with coordinates
(days, km) has its nearest locations at the same station on the previous and next days,
whatever the data say about how far correlation reaches in time and in space.

The latent kernels learn one lengthscale per channel and axis. :func:`learn_metric` trains
the model briefly (a *warm-up*), reads those lengthscales, and rescales every axis by the
inverse of its lengthscale (the geometric mean over channels); this is repeated a few times,
because in badly scaled units a lengthscale far from its start takes many optimiser steps to
get there, while in rescaled units it starts near its value. When the learnt axes differ by
less than ``min_ratio`` from the starting metric the coordinates are left as they are: the
warm-up then changes nothing at all.

The rounds stop early when they can no longer reach ``min_ratio``: after each round the
metric is projected forward as if every remaining round moved the axes :data:`ROUND_GROWTH`
times as far (in log units) as this one did; when even that projection stays within
``min_ratio``, the coordinates will be kept whatever the remaining rounds learn, so they are
not run. On an isotropic survey (Jura: the first round moves the axes apart by 1.003) or a
grid in comparable units (SPE10's cells in metres: 1.14) one round decides; on a station
network (days against km: 1.8 after the first round, 30-50 after three) all of them run.
The growth allowance is there because a round can move the axes further than the one before
once the rescaled metric changes the neighbour sets (the station networks' second rounds
moved 8-11x after 1.8x); it was not tuned.

The result is a per-axis factor: the engine models ``(x - offset) * scale`` and applies the
same factor to new locations, so the neighbours of training, context and prediction are all
chosen in the learnt metric.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .config import GPVAEConfig
    from .core import GPVAEEngine

__all__ = ["axis_scales", "learn_metric", "warmup_epochs", "apply_metric", "spread", "WARMUP_STEPS", "WARMUP_SHARE",
           "WARMUP_ROUNDS", "MIN_RATIO", "ROUND_GROWTH"]

#: optimiser steps of each warm-up round at most (chosen on the station tuning split, see
#: docs/benchmarks.md) ...
WARMUP_STEPS = 250
#: ... and at most this share of the fit's own steps (1000 full-batch steps: 63 per round)
WARMUP_SHARE = 1 / 16
#: warm-up rounds (each re-selects the neighbours in the metric learnt so far)
WARMUP_ROUNDS = 3
#: the learnt metric is used when its axes differ from the starting ones by more than this factor
MIN_RATIO = 3.0
#: the remaining rounds are skipped unless they could reach MIN_RATIO moving the axes this many
#: times as far (log units) each as the last round did
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
        ``1 / geometric mean over channels`` of each axis's lengthscale (inverse coordinate
        units), so that distances in ``x * scale`` count lengthscales.
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
    """Whether ``remaining`` more rounds could take the metric ``total`` beyond ``min_ratio``,
    each moving the axes :data:`ROUND_GROWTH` times as far (log units) as the last ``step``
    (with none left: whether it is beyond already)."""
    return spread(total * step ** (ROUND_GROWTH * remaining)) > min_ratio


def warmup_epochs(config: GPVAEConfig, n_points: int, steps: int | None = None) -> int:
    """Epochs of one warm-up round, in whole epochs (at least one).

    ``steps`` optimiser steps when given; by default :data:`WARMUP_STEPS`, but at most
    :data:`WARMUP_SHARE` of the fit's own steps.
    """
    per_epoch = math.ceil(n_points / config.batch_for(n_points))
    if steps is None:
        steps = min(WARMUP_STEPS, WARMUP_SHARE * config.n_epochs(n_points) * per_epoch)
    return max(1, math.ceil(steps / per_epoch))


def _warm_lengthscales(engine: GPVAEEngine, x: np.ndarray, values: np.ndarray, steps: int | None) -> np.ndarray | None:
    """Train a copy of ``engine``'s model briefly on ``x``; its latent lengthscales (L, D)."""
    from .core import GPVAEEngine

    cfg = engine.config
    epochs = warmup_epochs(cfg, x.shape[0], steps)
    # the base KL weight: the warm-up only learns lengthscales, it does not choose beta; and a
    # constant rate: a decaying one would stop the short warm-up before the lengthscales move
    beta = None if cfg.beta == "auto" else cfg.beta
    warm = GPVAEEngine(cfg.replace(epochs=epochs, calibrate=False, holdout=0.0, beta=beta, lr_schedule="constant",
                                   extra={**cfg.extra, "metric": "fixed"}), progress=False)
    with warnings.catch_warnings():  # what the field holds is said once, by the main fit
        warnings.simplefilter("ignore", UserWarning)
        warm.fit(x, values)
    ls = getattr(warm.model.kernel, "lengthscale", None)
    if ls is None:
        return None
    ls = ls.detach().cpu().double().numpy()
    if not np.all(np.isfinite(ls)) or np.any(ls <= 0):
        raise FloatingPointError(
            f"training diverged in the warm-up that learns the metric (lengthscales "
            f"{np.array2string(ls.ravel()[:4], precision=3)}); try a smaller lr, dtype='float64', "
            "or extra={'metric': 'fixed'}"
        )
    return ls if ls.ndim == 2 and ls.shape[1] == x.shape[1] else None


def uses_learnt_metric(engine: GPVAEEngine, n_dims: int, resume: object) -> bool:
    """Whether :func:`learn_metric` runs: more than one axis, a built-in kernel that learns."""
    cfg = engine.config
    mode = cfg.extra.get("metric", "auto")
    if mode not in ("auto", "fixed"):
        raise ValueError(f"unknown metric {mode!r}; choose 'auto' (learnt) or 'fixed'")
    return (mode == "auto" and resume is None and n_dims > 1 and isinstance(cfg.kernel, str)
            and cfg.learn_kernel and cfg.neighbours > 0)


def learn_metric(
    engine: GPVAEEngine, x: np.ndarray, y: np.ndarray, observed: np.ndarray, *,
    rounds: int = WARMUP_ROUNDS, steps: int | None = None, min_ratio: float = MIN_RATIO,
    trace: list[float] | None = None,
) -> np.ndarray:
    """Per-axis factors of the learnt metric, or ones when it is close to the given one.

    Parameters
    ----------
    engine : GPVAEEngine
        The engine being fitted (its config is used; it is not changed).
    x : array, shape (N, D)
        Centred coordinates (model units).
    y : array, shape (N, K)
        Standardised values (anything where not observed).
    observed : array of bool, shape (N, K)
    rounds : int
        Warm-up rounds.
    steps : int, optional
        Optimiser steps in each (default: see :func:`warmup_epochs`).
    min_ratio : float
        Keep the coordinates (factors of one) unless some pair of axes is rescaled relative
        to each other by more than this factor. The rounds stop early once the remaining
        ones cannot get there (see the module docstring).
    trace : list, optional
        Receives the :func:`spread` of the metric learnt after each round that ran.

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
    with Progress(shown_here(engine.progress), rounds, "metric warm-up", unit="rounds") as bar:
        for done in range(1, rounds + 1):
            ls = _warm_lengthscales(engine, x * total, values, steps)
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


def apply_metric(engine: GPVAEEngine, x: np.ndarray, y: np.ndarray, observed: np.ndarray,
                 resume: dict | None) -> np.ndarray:
    """The engine's coordinates in the metric it will model, and ``engine.x_scale_`` set.

    A resumed fit keeps the factors of its checkpoint; otherwise :func:`learn_metric` decides
    (when :func:`uses_learnt_metric`), and ``engine.metric_trace_`` lists the :func:`spread`
    of the metric after each warm-up round run (empty without warm-ups). Called by :meth:`GPVAEEngine.fit` right after the
    values are standardised, before anything looks at neighbours.
    """
    engine.metric_trace_ = []
    if resume is not None:
        engine.x_scale_ = saved_scale(resume["engine"])
    elif uses_learnt_metric(engine, x.shape[1], resume):
        extra = engine.config.extra
        engine.x_scale_ = learn_metric(engine, x, y, observed,
                                       rounds=int(extra.get("metric_rounds", WARMUP_ROUNDS)),
                                       steps=extra.get("metric_steps"),
                                       min_ratio=float(extra.get("metric_min_ratio", MIN_RATIO)),
                                       trace=engine.metric_trace_)
    else:
        engine.x_scale_ = 1.0
    if np.all(np.asarray(engine.x_scale_) == 1.0):
        return x
    x = x * engine.x_scale_
    engine._x = x  # the field held for prediction is in the same metric
    return x
