"""Joint draws of the latent field: equally likely realisations, not cell-by-cell samples.

A draw of the latent GPs given the anchors (the locations with observed values, whose encoder
posteriors act as Gaussian pseudo-observations ``u = z + e``, ``e ~ N(0, E)``) follows
Matheron's rule: draw the prior ``f`` everywhere and noise ``e`` at the anchors, then

    z(t) = f(t) + sum_j w_tj (u_j - f_j - e_j),

with the kriging weights ``w`` of the H nearest anchors that the neighbours' posterior
(:func:`~geogpvae.engine.predict.neighbour_posterior`) uses. Its mean is that posterior's mean
and its variance that posterior's variance, exactly, whatever the weights; the covariance
between locations is the GP's. The prior draw is the Vecchia factorisation's, in a random
ordering: each location given its H nearest earlier ones, run level by level of the dependency
graph, so that every location of a level is drawn at once.

Each location's draw is then moved onto the latent posterior the predictions use there (the
source calibration chose: encoder, neighbours, combined), ``mean + sd / sd_nb * (z - mean_nb)``,
so that the draws' pointwise moments are those of :meth:`~geogpvae.engine.core.GPVAEEngine.predict`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..gp.kernels import ChannelKernel
from ..gp.neighbours import knn, order_points, ordered_neighbours
from ..gp.priors.spa import spa_conditional

__all__ = ["VecchiaFactor", "anchor_weights", "conditioned_draws", "dependency_levels", "prior_draws",
           "realisation_noise", "vecchia_factor"]

#: locations per block of kernel solves
CHUNK = 16384


def realisation_noise(shape: tuple[int, ...], seed: int, first: int, n: int, dtype=torch.float64,
                      stream: int = 0) -> torch.Tensor:
    """Standard normal numbers of shape ``shape + (n,)`` for realisations ``first`` to ``first + n - 1``,
    each realisation from a generator of its own (the same draws whatever the grouping)."""
    out = torch.empty(shape + (n,), dtype=dtype)
    for i in range(n):
        gen = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, first + i, stream]).generate_state(1)[0]))
        out[..., i] = torch.randn(shape, generator=gen, dtype=dtype)
    return out


def dependency_levels(nbr: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Each point's depth in the dependency graph of ``nbr`` (N, H) (-1 padded): 0 without
    neighbours, else one more than its deepest neighbour. Every neighbour of a point comes before
    it in ``order`` (default: the points' own order)."""
    depth = [0] * nbr.shape[0]
    rows = nbr.tolist()
    for i in (range(nbr.shape[0]) if order is None else order.tolist()):
        deepest = -1
        for j in rows[i]:
            if j >= 0 and depth[j] > deepest:
                deepest = depth[j]
        depth[i] = deepest + 1
    return np.asarray(depth, dtype=np.int64)


def _conditionals(kernel: ChannelKernel, x: torch.Tensor, nbr: np.ndarray, jitter: float,
                  noise: torch.Tensor | None = None, x_nbr: torch.Tensor | None = None):
    """Weights (N, L, H) and conditional variances (N, L) of each row of ``x`` given its neighbours
    ``nbr`` (rows of ``x_nbr``, default ``x``; -1 padded), with noise (A, L) on the neighbours."""
    x_nbr = x if x_nbr is None else x_nbr
    idx = torch.as_tensor(nbr, device=x.device)
    weights, cond = [], []
    for s in range(0, x.shape[0], CHUNK):
        nb = idx[s : s + CHUNK]
        valid, safe = nb >= 0, nb.clamp_min(0)
        w, v = spa_conditional(kernel, x[s : s + CHUNK], x_nbr[safe], valid, jitter,
                               nbr_noise=None if noise is None else noise[safe].mT)
        weights.append(w * valid.unsqueeze(1))
        cond.append(v)
    return torch.cat(weights), torch.cat(cond)


@dataclass
class VecchiaFactor:
    """The prior's Vecchia factor in a random ordering: each location given its earlier neighbours.

    Attributes
    ----------
    nbr : ndarray of int, shape (N, H)
        Each location's earlier neighbours (-1 padded).
    weights : Tensor, shape (N, L, H)
        Their conditional weights per channel.
    sd : Tensor, shape (N, L)
        The conditional standard deviations.
    levels : list of Tensor
        The locations of each level of the dependency graph, in drawing order.
    """

    nbr: np.ndarray
    weights: torch.Tensor
    sd: torch.Tensor
    levels: list[torch.Tensor]


@torch.no_grad()
def vecchia_factor(kernel: ChannelKernel, x: torch.Tensor, *, neighbours: int, jitter: float, seed: int,
                   backend: str = "auto") -> VecchiaFactor:
    """The Vecchia factor of the L latent GPs' prior at ``x`` (N, D), in the random ordering of ``seed``.

    Parameters
    ----------
    kernel : ChannelKernel
    x : Tensor, shape (N, D)
    neighbours : int
        H, the earlier points each location is drawn given.
    jitter : float
        The prior's relative nugget.
    seed : int
    backend : str

    Returns
    -------
    VecchiaFactor
    """
    xs = x.detach().cpu().double().numpy()
    order = order_points(xs, "random", seed=seed)
    nbr = ordered_neighbours(xs, min(neighbours, max(len(xs) - 1, 0)), order, backend=backend)
    weights, cond = _conditionals(kernel, x, nbr, jitter)
    depth = dependency_levels(nbr, order)
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    levels = [torch.as_tensor(order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    return VecchiaFactor(np.where(nbr >= 0, nbr, 0), weights, cond.clamp_min(0).sqrt(), levels)


@torch.no_grad()
def prior_draws(factor: VecchiaFactor, eps: torch.Tensor) -> torch.Tensor:
    """Draws of the prior from standard normal numbers ``eps`` (N, L, R): shape (N, L, R)."""
    weights, sd = factor.weights.to(eps.dtype), factor.sd.to(eps.dtype)
    idx = torch.as_tensor(factor.nbr)
    draws = torch.zeros_like(eps)  # padded slots read row 0 with weight 0: it must not hold NaN yet
    for level, every in enumerate(factor.levels):
        for rows in every.split(CHUNK):  # a level's rows are independent: in blocks, to bound the gather
            step = sd[rows].unsqueeze(-1) * eps[rows]
            if level:
                step += torch.einsum("mlh,mhlr->mlr", weights[rows], draws[idx[rows]])
            draws[rows] = step
    return draws


@torch.no_grad()
def anchor_weights(kernel: ChannelKernel, x: torch.Tensor, x_anchor: torch.Tensor, noise: torch.Tensor, *,
                   neighbours: int, jitter: float, backend: str = "auto"):
    """Each location's H nearest anchors and their kriging weights on the pseudo-observations.

    Returns
    -------
    idx : ndarray of int, shape (N, H)
    weights : Tensor, shape (N, L, H)
    cond_var : Tensor, shape (N, L)
        The neighbours' posterior variance at each location.
    """
    a = x_anchor.shape[0]
    h = min(max(neighbours, 1), a)
    _, idx = knn(x_anchor.detach().cpu().double().numpy(), h, query=x.detach().cpu().double().numpy(),
                 backend=backend)
    weights, cond = _conditionals(kernel, x, idx, jitter, noise=noise, x_nbr=x_anchor)
    return idx, weights, cond


@torch.no_grad()
def conditioned_draws(prior: torch.Tensor, prior_at_anchors: torch.Tensor, pseudo: torch.Tensor,
                      noise: torch.Tensor, eta: torch.Tensor, idx: np.ndarray, weights: torch.Tensor,
                      cond_var: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """Matheron's rule, then each location moved onto the posterior ``N(mean, var)`` predictions use.

    Parameters
    ----------
    prior : Tensor, shape (N, L, R)
        Prior draws at the locations.
    prior_at_anchors : Tensor, shape (A, L, R)
        The same draws at the anchors.
    pseudo, noise : Tensor, shape (A, L)
        The anchors' pseudo-observations and their noise variances.
    eta : Tensor, shape (A, L, R)
        Standard normal numbers for the anchors' noise.
    idx, weights, cond_var
        From :func:`anchor_weights`.
    mean, var : Tensor, shape (N, L)
        The latent posterior the predictions use at each location.

    Returns
    -------
    Tensor, shape (N, L, R)
    """
    dt = prior.dtype
    noisy = pseudo.to(dt).unsqueeze(-1) - prior_at_anchors - noise.clamp_min(0).sqrt().to(dt).unsqueeze(-1) * eta
    out = torch.empty_like(prior)
    index = torch.as_tensor(idx)
    w = weights.to(dt)
    for s in range(0, prior.shape[0], CHUNK):
        rows = slice(s, s + CHUNK)
        resid = prior[rows] + torch.einsum("mlh,mhlr->mlr", w[rows], noisy[index[rows]])
        own_mean = torch.einsum("mlh,mhl->ml", w[rows], pseudo.to(dt)[index[rows]])
        ratio = (var[rows].to(dt) / cond_var[rows].to(dt).clamp_min(1e-30)).sqrt()
        out[rows] = mean[rows].to(dt).unsqueeze(-1) + ratio.unsqueeze(-1) * (resid - own_mean.unsqueeze(-1))
    return out
