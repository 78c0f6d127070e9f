"""Observed values held out from training, and the score of their predictive fit.

A small share of the observed values (the *check* values) is taken out of the field before
``beta="auto"``'s candidates train: the likelihood never sees them, the encoder never sees them
(neither as a location's own input nor in its neighbours' context summaries). Each candidate's
(weight-averaged) predictive distribution of those values is then scored by its Gaussian
negative log-likelihood (:func:`predictive_nll`). The check values are observed values of the
training field itself; which ones are held out is decided in :mod:`~geogpvae.engine.holdout`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["check_entries", "CheckValues", "predictive_nll"]


def check_entries(
    observed: np.ndarray, fraction: float, *, seed: int, max_values: int = 20000, min_left: int = 10
) -> np.ndarray:
    """Pick the observed values held out to score the fit.

    Parameters
    ----------
    observed : ndarray of bool, shape (N, K)
    fraction : float
        Share of each variable's observed values held out (0 holds out nothing).
    seed : int
        Seed of the random choice.
    max_values : int
        At most this many values in all (large fields need no more to score the fit).
    min_left : int
        Every variable keeps at least this many observed values for training (or all of
        them when it has fewer than twice as many): nothing is held out of sparse variables.

    Returns
    -------
    ndarray of bool, shape (N, K)
        True at the held-out values (a subset of ``observed``).
    """
    held = np.zeros_like(observed, dtype=bool)
    if fraction <= 0:
        return held
    rng = np.random.default_rng([int(seed), 4242])
    k = observed.shape[1]
    budget = max(1, max_values // max(k, 1))
    for j in range(k):
        rows = np.flatnonzero(observed[:, j])
        if rows.size < 2 * min_left:
            continue
        take = min(round(fraction * rows.size), rows.size - min_left, budget)
        if take > 0:
            held[rng.choice(rows, take, replace=False), j] = True
    return held


@dataclass
class CheckValues:
    """The held-out values, as tensors on the model's device.

    Attributes
    ----------
    rows : Tensor of int64, shape (M,)
        Locations with at least one held-out value.
    mask : Tensor of bool, shape (M, K)
        Which of their values are held out.
    y : Tensor, shape (M, K)
        The standardised held-out values (0 elsewhere).
    weights : Tensor, shape (K,), optional
        Weight of each variable in the score (renormalised over the variables with held-out
        values); equal weights when None.
    """

    rows: torch.Tensor
    mask: torch.Tensor
    y: torch.Tensor
    weights: torch.Tensor | None = None

    @classmethod
    def from_arrays(cls, held: np.ndarray, y: np.ndarray, *, device: torch.device, dtype: torch.dtype,
                    weights: np.ndarray | None = None) -> CheckValues:
        """Tensors of the held-out values ``held`` (N, K) of the standardised field ``y``, with
        per-variable ``weights`` (K,) of the score."""
        rows = np.flatnonzero(held.any(1))
        return cls(
            rows=torch.as_tensor(rows, dtype=torch.int64, device=device),
            mask=torch.as_tensor(held[rows], device=device),
            y=torch.as_tensor(np.where(held[rows], y[rows], 0.0), dtype=dtype, device=device),
            weights=None if weights is None else torch.as_tensor(np.asarray(weights, dtype=float), dtype=dtype,
                                                                 device=device),
        )

    @property
    def count(self) -> int:
        return int(self.mask.sum())


@torch.no_grad()
def predictive_nll(
    model: Any, inputs: tuple, check: CheckValues, eps: torch.Tensor, *, calibrated: bool = True,
    shape: bool | torch.Tensor = True,
) -> float:
    """Gaussian negative log-likelihood of the check values under the encoder predictive.

    Parameters
    ----------
    model : GPVAE
    inputs : tuple
        ``(y, visible, context)`` of the check locations as the encoder sees them in training
        (held-out values hidden).
    check : CheckValues
    eps : Tensor, shape (S, M, L)
        Standard normal draws (fixed across calls, so that scores differ by the model only).
    calibrated : bool
        Score each variable after scaling its predictive variances by the factor that
        minimises its NLL (the mean squared standardised error), as the engine's calibration
        does after training: the score then judges the predictive mean and the shape of the
        uncertainty, not a miscalibrated overall spread that calibration removes anyway.
    shape : bool or Tensor of bool, shape (K,)
        Which variables are scored with their predictive variances as the model gives them.
        The others get one variance each, their mean squared error, so that only the
        predictive mean is judged: ``0.5 log(2 pi e MSE)`` nats per value.

    Returns
    -------
    float
        Nats per held-out value, averaged per variable and then over the variables (weighted by
        ``check.weights`` when set), with the predictive moment-matched over ``S`` latent draws
        plus the likelihood noise.
    """
    mean, var = model.encode(*inputs)
    pred = model.decode(mean + var.sqrt() * eps)  # (S, M, K)
    mu = pred.mean(0)
    v = pred.var(0, unbiased=False) + model.hidden_var
    mask = check.mask.to(v.dtype)
    count = mask.sum(0)
    used = count > 0
    err2 = (check.y - mu).square()
    shape = torch.as_tensor(shape, dtype=torch.bool, device=v.device)
    if not bool(shape.all()):  # one variance per variable: its mean squared error
        v = torch.where(shape, v, ((err2 * mask).sum(0) / count.clamp_min(1)).clamp_min(1e-12))
    z2 = err2 / v
    if calibrated:  # each variable's variances scaled by the factor that minimises its NLL
        factor = (z2 * mask).sum(0) / count.clamp_min(1)
        factor = torch.where(used, factor, torch.ones_like(factor)).clamp_min(1e-12)
        v, z2 = v * factor, z2 / factor
    nll = 0.5 * (torch.log(2 * math.pi * v) + z2)
    per_var = (nll * mask).sum(0) / count.clamp_min(1)
    if check.weights is None:
        return float(per_var[used].mean())
    w = check.weights * used
    return float((per_var * w).sum() / w.sum()) if float(w.sum()) > 0 else float(per_var[used].mean())
