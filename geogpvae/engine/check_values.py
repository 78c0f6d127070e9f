"""Observed values held out from training (the *check* values), and their predictive NLL.

Neither the likelihood nor the encoder (own inputs or context) sees them; which ones are held
out is decided in :mod:`~geogpvae.engine.holdout`.
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
    max_values : int
        At most this many values in all.
    min_left : int
        Values each variable keeps (all where it has fewer than twice as many).

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
        Weight of each variable in the score (renormalised over those scored); None: equal.
    """

    rows: torch.Tensor
    mask: torch.Tensor
    y: torch.Tensor
    weights: torch.Tensor | None = None

    @classmethod
    def from_arrays(cls, held: np.ndarray, y: np.ndarray, *, device: torch.device, dtype: torch.dtype,
                    weights: np.ndarray | None = None) -> CheckValues:
        """Tensors of the held-out values ``held`` (N, K) of ``y``, with score ``weights`` (K,)."""
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
        ``(y, visible, context)`` of the check locations, held-out values hidden.
    check : CheckValues
    eps : Tensor, shape (S, M, L)
        Standard normal draws (fixed across calls).
    calibrated : bool
        Scale each variable's variances by the factor minimising its NLL (its mean squared z) first.
    shape : bool or Tensor of bool, shape (K,)
        Variables scored with the model's variances; the others with their MSE: ``0.5 log(2 pi e MSE)``.

    Returns
    -------
    float
        Nats per held-out value, per variable then over the variables (``check.weights``), the
        predictive moment-matched over ``S`` latent draws plus the likelihood noise.
    """
    mean, var = model.encode(*inputs)
    pred = model.decode(mean + var.sqrt() * eps)  # (S, M, K)
    mu = pred.mean(0)
    v = pred.var(0, unbiased=False) + model.noise_var
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
