"""Realisations of a fitted engine's training field: equally likely filled fields, drawn jointly.

:func:`simulation_plan` computes once what every draw shares (the latent posterior and the
predictive moments at each location, the kriging weights on the anchors, the prior's Vecchia
factor); :func:`draw_realisations` then draws any group of realisations from it. A value is
drawn as the predictions' mixture would draw it at that location, so that the draws' pointwise
mean and spread are the predictions':

    y = m + sqrt(f) (loc + scale * decode(z) - m) + sqrt(f * n) * scale * e,   e ~ N(0, 1),

with ``m`` the predictive mean (modelled units), ``f`` the calibration's variance factor,
``n`` the variance added to the decoded spread (standardised units) and ``z`` the joint latent
draw (:mod:`~geogpvae.engine.simulation`); then each station's level (drawn once per station and
realisation) and the back-transform of log variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .predict import _decode, pseudo_observations
from .simulation import VecchiaFactor, anchor_weights, conditioned_draws, prior_draws, realisation_noise, vecchia_factor
from .targets import rows_of, self_index_of

__all__ = ["SimulationPlan", "draw_realisations", "simulation_plan"]

#: locations per chunk of the latent posterior and of decoding
CHUNK = 16384


@dataclass
class SimulationPlan:
    """What every realisation of one engine's training field shares.

    Attributes
    ----------
    mean, var : Tensor, shape (N, L)
        The latent posterior the predictions use at each location.
    mean_model : ndarray, shape (N, K)
        The predictive mean, in modelled units.
    factor, added : ndarray, shape (N, K)
        The calibration's variance factor and the variance added to the decoded spread
        (standardised units), per location and variable.
    anchors : ndarray of int, shape (A,)
        The locations with observed values.
    pseudo, noise : Tensor, shape (A, L)
        Their encoder posteriors as pseudo-observations.
    idx, weights, cond_var
        Each location's nearest anchors, kriging weights and the neighbours' variance.
    prior : VecchiaFactor
        The prior's factor, in the random ordering of the draws' seed.
    seed : int
        That seed.
    """

    mean: torch.Tensor
    var: torch.Tensor
    mean_model: np.ndarray
    factor: np.ndarray
    added: np.ndarray
    anchors: np.ndarray
    pseudo: torch.Tensor
    noise: torch.Tensor
    idx: np.ndarray
    weights: torch.Tensor
    cond_var: torch.Tensor
    prior: VecchiaFactor
    seed: int


def _variance_terms(post: Any, has_own: np.ndarray, visible: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per location and variable, the calibrated variance factor and the added variance, as
    :meth:`~geogpvae.engine.posterior.Posterior.moments` applies them."""
    m, k = visible.shape
    hidden, scales = post.added_terms(has_own, visible)
    added = (post.model.noise_var.detach().expand(m, k) if hidden is None else hidden).double().cpu().numpy()
    factors = None if post.calibration is None else np.atleast_2d(post.calibration)
    factor = np.ones((m, k))
    for regime, rows in ((0, has_own), (1, ~has_own)):
        vf = post.regime_factor(regime, factors, scales)
        if vf is not None:
            factor[rows] = vf
    return factor, added


@torch.no_grad()
def simulation_plan(engine: Any, seed: int) -> SimulationPlan:
    """The shared part of the realisations of a fitted engine's training field, for draws of ``seed``."""
    engine._require_fit()
    if engine._data is None:
        raise RuntimeError("this engine holds no training field (saved without data): it cannot draw realisations")
    cfg, model = engine.config, engine.model
    model.eval()
    post = engine.posterior()
    field, anchor = engine._training_field(), engine._anchor
    n = field.x.shape[0]
    self_index, targets = self_index_of(anchor, n), rows_of(field)
    means, variances, mms, factors, addeds = [], [], [], [], []
    for start in range(0, max(n, 1), CHUNK):
        rows = slice(start, min(start + CHUNK, n))
        target = targets(rows)
        mean, var, _ = post.latent(target, anchor, self_index[rows], cfg.predict_mode)
        has_own = target.observed.any(1).cpu().numpy()
        mm = post.moments(mean, var, samples=cfg.samples, seed=cfg.seed, calibrated=True, has_own=has_own,
                          visible=target.observed)[2]
        factor, added = _variance_terms(post, has_own, target.observed)
        for store, part in zip((means, variances, mms, factors, addeds), (mean, var, mm, factor, added)):
            store.append(part)
    prior_var = (model.kernel.outputscale * (1.0 + model.jitter)).detach()
    pseudo, noise = pseudo_observations(anchor["mean"], anchor["var"], prior_var)
    idx, weights, cond = anchor_weights(model.kernel, field.x, anchor["x"], noise, neighbours=cfg.neighbours,
                                        jitter=model.jitter, backend=cfg.neighbour_backend)
    prior = vecchia_factor(model.kernel, field.x, neighbours=cfg.neighbours, jitter=model.jitter, seed=seed,
                           backend=cfg.neighbour_backend)
    return SimulationPlan(torch.cat(means), torch.cat(variances), np.concatenate(mms), np.concatenate(factors),
                          np.concatenate(addeds), anchor["index"].cpu().numpy(), pseudo, noise, idx, weights, cond,
                          prior, int(seed))


@torch.no_grad()
def draw_realisations(engine: Any, plan: SimulationPlan, n: int, *, first: int = 0) -> np.ndarray:
    """Realisations ``first`` to ``first + n - 1`` of every variable at the training locations.

    Parameters
    ----------
    engine : GPVAEEngine
        Fitted, holding its training field.
    plan : SimulationPlan
        From :func:`simulation_plan` for this engine: its seed and a realisation's number give
        the same draw, whatever ``first`` and ``n``.
    n : int
    first : int

    Returns
    -------
    ndarray of float64, shape (n, N, K)
        In original units; every location and variable is drawn, observed ones too (callers put
        the observed values back).
    """
    model, seed = engine.model, plan.seed
    count, width = plan.mean.shape
    dt = plan.mean.dtype
    prior = prior_draws(plan.prior, realisation_noise((count, width), seed, first, n, dtype=dt, stream=0))
    eta = realisation_noise((len(plan.anchors), width), seed, first, n, dtype=dt, stream=1)
    z = conditioned_draws(prior, prior[torch.as_tensor(plan.anchors)], plan.pseudo, plan.noise, eta, plan.idx,
                          plan.weights, plan.cond_var, plan.mean, plan.var)
    del prior, eta
    k = len(engine.names)
    noise = realisation_noise((count, k), seed, first, n, dtype=torch.float64, stream=2).numpy()
    levels = engine._levels_at(None)
    if levels is not None:
        sites = engine.site_levels_.sites.shape[0]
        site_noise = realisation_noise((sites, k), seed, first, n, dtype=torch.float64, stream=3).numpy()
    out = np.empty((n, count, k))
    loc, scale, m = engine.loc, engine.scale, plan.mean_model
    spread = np.sqrt(plan.factor)
    jitter_sd = np.sqrt(plan.factor * plan.added) * scale
    fixed = np.isfinite(engine.constant_) if engine.constant_ is not None else np.zeros(k, bool)
    for r in range(n):
        decoded = np.empty((count, k))
        for s in range(0, count, CHUNK):
            decoded[s : s + CHUNK] = _decode(model, z[s : s + CHUNK, :, r].contiguous()).double().cpu().numpy()
        y = m + spread * (loc + scale * decoded - m) + jitter_sd * noise[..., r]
        if levels is not None:
            y += levels[0] + np.sqrt(levels[1]) * site_noise[engine._site_rows, :, r]
        y[:, engine.log] = np.exp(y[:, engine.log])
        y[:, fixed] = engine.constant_[fixed]
        out[r] = y
    return out
