"""Sparse precision approximation (SPA): the Vecchia-factorised latent prior.

``p(Z) ~ prod_j p(z_j | Z_n(j))``, ``n(j)`` the H nearest *earlier* points of ``j`` (paper eq. 9).
Against ``q(Z) = prod_j N(mu_j, diag s_j^2)`` the KL sums, per channel (zero prior mean):

    E_{q(Z_n(j))} KL[ q(z_j) || p(z_j | Z_n(j)) ]                                 (appendix B.2)
    b        = K_nn^{-1} k_nj,    Sigma_p = k_jj - k_jn K_nn^{-1} k_nj
    E[(mu_p - mu_q)^2] = b' S_n b + (b' mu_n - mu_j)^2,    S_n = diag(s_n^2)
    KL_j     = 1/2 [ (E[(mu_p - mu_q)^2] + s_j^2) / Sigma_p + log Sigma_p - log s_j^2 - 1 ]

With ``u = C^{-1} e`` the last column of the precision of ``(Z_n(j), z_j)``: ``Sigma_p = 1 / u_j``,
``b = -u_n / u_j``. H = N - 1 gives the dense GP's ``KL[q(Z) || N(0, K)]`` exactly; H = 0 the VAE's.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..kernels import ChannelKernel
from ..rows import take_rows
from ._blocks import finish_block, prior_block, spd_solve

__all__ = ["SPAPrior", "spa_kl", "spa_kl_given_conditional", "spa_conditional", "spa_log_prior"]


def spa_conditional(
    kernel: ChannelKernel,
    x_target: torch.Tensor,
    x_nbr: torch.Tensor,
    nbr_valid: torch.Tensor,
    jitter: float,
    nbr_noise: torch.Tensor | None = None,
    kernel_blocks: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and variance of ``p(z_target | Z_nbr)`` under the latent GP prior.

    With ``nbr_noise``, given ``u_n = z_n + e_n``, ``e_n ~ N(0, E = diag(nbr_noise))``:
    ``b = (K_nn + E)^{-1} k_n,target`` and ``k_tt - k_t,n (K_nn + E)^{-1} k_n,target``.

    Parameters
    ----------
    kernel : ChannelKernel
    x_target : Tensor, shape (B, D)
    x_nbr : Tensor, shape (B, H, D)
        Neighbour locations; padded slots are ignored.
    nbr_valid : Tensor of bool, shape (B, H)
    jitter : float
        Relative nugget of the prior.
    nbr_noise : Tensor, shape (B, L, H), optional
        Variance of the noise on each neighbour and channel (ignored at padded slots).
    kernel_blocks : Tensor, shape (B, L, H+1, H+1), optional
        Kernel covariances of the neighbours and the target (last), if known; else computed.

    Returns
    -------
    weights : Tensor, shape (B, L, H)
        ``b = K_nn^{-1} k_n,target`` (``K_nn + E`` with noise); exactly 0 at padded slots.
    cond_var : Tensor, shape (B, L)
        ``k_target,target - k_target,n K_nn^{-1} k_n,target`` (nugget included).
    """
    b_size, h = x_nbr.shape[0], x_nbr.shape[1]
    valid = torch.cat([nbr_valid, nbr_valid.new_ones(b_size, 1)], dim=1)
    if kernel_blocks is None:
        pts = torch.cat([x_nbr, x_target.unsqueeze(1)], dim=1)  # (B, H+1, D)
        cov = prior_block(kernel, pts, valid, jitter)  # (B, L, H+1, H+1)
    else:
        cov = finish_block(kernel_blocks, kernel, valid, jitter)
    if nbr_noise is not None:  # padded slots are decoupled: noise there changes nothing
        if torch.is_grad_enabled() and (cov.requires_grad or nbr_noise.requires_grad):
            cov = cov + torch.diag_embed(torch.cat([nbr_noise, nbr_noise.new_zeros(nbr_noise.shape[:-1] + (1,))], -1))
        else:  # in place on the new cov: the same sums, no (B, L, H+1, H+1) temporaries
            cov.diagonal(dim1=-2, dim2=-1)[..., :h] += nbr_noise
    # last column of the joint precision P = cov^{-1}: Sigma_p = 1 / P_jj, b = -P_nj / P_jj
    unit = torch.zeros(cov.shape[:-1] + (1,), dtype=cov.dtype, device=cov.device)
    unit[..., h, 0] = 1.0
    col = spd_solve(cov, unit).squeeze(-1)  # (B, L, H+1)
    p_jj = col[..., h]
    cond_var = 1.0 / p_jj
    weights = -col[..., :h] / p_jj.unsqueeze(-1)
    return weights, cond_var


def spa_kl(
    kernel: ChannelKernel,
    x_j: torch.Tensor,
    x_nbr: torch.Tensor,
    nbr_valid: torch.Tensor,
    mu_j: torch.Tensor,
    var_j: torch.Tensor,
    mu_nbr: torch.Tensor,
    var_nbr: torch.Tensor,
    jitter: float = 1e-4,
) -> torch.Tensor:
    """Expected KL ``E_q(Z_n(j)) KL[q(z_j) || p(z_j | Z_n(j))]`` for a batch of points.

    Parameters
    ----------
    kernel : ChannelKernel
    x_j : Tensor, shape (B, D)
    x_nbr : Tensor, shape (B, H, D)
        Locations of each point's earlier neighbours, padded.
    nbr_valid : Tensor of bool, shape (B, H)
        False at padded slots.
    mu_j, var_j : Tensor, shape (B, L)
        Encoder mean and variance of each batch point.
    mu_nbr, var_nbr : Tensor, shape (B, H, L)
        Encoder moments of the neighbours (any finite value at padded slots).
    jitter : float
        Relative nugget of the prior.

    Returns
    -------
    Tensor, shape (B,)
        Summed over channels (nats).
    """
    weights, cond_var = spa_conditional(kernel, x_j, x_nbr, nbr_valid, jitter)  # (B,L,H), (B,L)
    return spa_kl_given_conditional(weights, cond_var, mu_j, var_j, mu_nbr, var_nbr)


def spa_kl_given_conditional(
    weights: torch.Tensor,
    cond_var: torch.Tensor,
    mu_j: torch.Tensor,
    var_j: torch.Tensor,
    mu_nbr: torch.Tensor,
    var_nbr: torch.Tensor,
) -> torch.Tensor:
    """The expected KL of each point from its prior conditional's weights and variance.

    Parameters
    ----------
    weights : Tensor, shape (B, L, H)
    cond_var : Tensor, shape (B, L)
        From :func:`spa_conditional`.
    mu_j, var_j : Tensor, shape (B, L)
    mu_nbr, var_nbr : Tensor, shape (B, H, L)

    Returns
    -------
    Tensor, shape (B,)
    """
    mu_n = mu_nbr.mT  # (B, L, H)
    var_n = var_nbr.mT
    cond_mean = (weights * mu_n).sum(-1)  # b' mu_n
    spread = (weights.square() * var_n).sum(-1)  # b' S_n b
    expected_sq = spread + (cond_mean - mu_j).square()
    kl = 0.5 * ((expected_sq + var_j) / cond_var + torch.log(cond_var) - torch.log(var_j) - 1.0)
    return kl.sum(-1)


def spa_log_prior(
    kernel: ChannelKernel,
    x: torch.Tensor,
    z: torch.Tensor,
    nbr: torch.Tensor,
    jitter: float = 1e-4,
) -> torch.Tensor:
    """Vecchia log-density ``sum_j log p(z_j | Z_n(j))`` of latent values.

    Parameters
    ----------
    kernel : ChannelKernel
    x : Tensor, shape (N, D)
    z : Tensor, shape (N, L)
    nbr : Tensor of int64, shape (N, H)
        Conditioning sets, ``-1`` padded (:func:`geogpvae.gp.neighbours.ordered_neighbours`).
    jitter : float

    Returns
    -------
    Tensor, scalar
        Summed over points and channels.
    """
    valid = nbr >= 0
    idx = nbr.clamp_min(0)
    weights, cond_var = spa_conditional(kernel, x, x[idx], valid, jitter)
    mean = (weights * z[idx].mT).sum(-1)
    resid = z - mean
    return (-0.5 * (resid.square() / cond_var + torch.log(cond_var) + math.log(2 * math.pi))).sum()


class SPAPrior:
    """The sparse-precision (Vecchia) prior of a mini-batch: the KL term of its ELBO.

    The batch mean of :func:`spa_kl_given_conditional` (appendix B.2); with shared stencils
    (``batch.stencil_index``) each distinct neighbour geometry is factorised once.
    """

    name = "spa"

    def kl(
        self, kernel: ChannelKernel, batch: Any, mean: torch.Tensor, var: torch.Tensor, jitter: float
    ) -> torch.Tensor:
        """KL estimate per location (a scalar) for ``batch``.

        Parameters
        ----------
        kernel : ChannelKernel or GPyTorchLatentKernel
        batch : geogpvae.engine.model.Batch
            Rows of the batch (``batch_pos``) and neighbours (``nbr_pos``), coordinates, stencils.
        mean, var : Tensor, shape (M, L)
            Encoder posterior of every encoded row.
        jitter : float
            Relative nugget of the prior.
        """
        pos, nbr = batch.batch_pos, batch.nbr_pos
        if batch.stencil_index is not None:
            offsets = batch.stencil_offsets
            centre = offsets.new_zeros((offsets.shape[0], offsets.shape[-1]))
            w, cond_var = spa_conditional(kernel, centre, offsets, batch.stencil_valid, jitter)
            w, cond_var = take_rows(w, batch.stencil_index), take_rows(cond_var, batch.stencil_index)
        else:
            w, cond_var = spa_conditional(kernel, batch.x_batch, batch.x_nbr, batch.nbr_valid, jitter)
        kl = spa_kl_given_conditional(w, cond_var, take_rows(mean, pos), take_rows(var, pos),
                                      take_rows(mean, nbr), take_rows(var, nbr))
        return kl.mean()
