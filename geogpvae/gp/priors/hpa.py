"""Hierarchical prior approximation (HPA): the KL on each point's neighbourhood.

For each point ``i`` of a mini-batch, ``n(i)`` holds its H nearest locations among all points
(``i`` itself first). The prior term of the HPA ELBO (paper eq. 8, appendix B.1) is::

    KL[ q(Z_n(i)) || p(Z_n(i)) ] = 1/2 sum_l [ mu' K^{-1} mu + tr(K^{-1} S) + log|K| - sum log s^2 - |n(i)| ]

per channel ``l``: ``K`` the prior covariance on ``X_n(i)`` (zero mean), ``mu``, ``S = diag(s^2)`` the
encoder's means and variances there; ``tr(K^{-1} S) = ||L^{-1} S^{1/2}||_F^2`` with ``K = L L'``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..kernels import ChannelKernel
from ..rows import take_rows
from ._blocks import checked_cholesky, prior_block

__all__ = ["HPAPrior", "hpa_kl", "gaussian_kl_blocks"]


def hpa_kl(
    kernel: ChannelKernel,
    x_nbr: torch.Tensor,
    nbr_valid: torch.Tensor,
    mu_nbr: torch.Tensor,
    var_nbr: torch.Tensor,
    jitter: float = 1e-4,
) -> torch.Tensor:
    """``KL[q(Z_n(i)) || p(Z_n(i))]`` for a batch of neighbourhoods.

    Parameters
    ----------
    kernel : ChannelKernel
    x_nbr : Tensor, shape (B, H, D)
        Locations of each neighbourhood (padded).
    nbr_valid : Tensor of bool, shape (B, H)
        False at padded slots.
    mu_nbr, var_nbr : Tensor, shape (B, H, L)
        Encoder means and variances on each neighbourhood.
    jitter : float
        Relative nugget of the prior.

    Returns
    -------
    Tensor, shape (B,)
        KL of each neighbourhood, summed over channels (nats).
    """
    cov = prior_block(kernel, x_nbr, nbr_valid, jitter)  # (B, L, H, H)
    v = nbr_valid.unsqueeze(1)  # (B, 1, H)
    # padded slots: q = N(0, 1) against an independent N(0, 1) -> zero KL
    mu = torch.where(v, mu_nbr.mT, 0.0)
    var = torch.where(v, var_nbr.mT, 1.0)
    return _GaussianKL.apply(cov, mu, var).sum(-1)


def gaussian_kl_blocks(
    cov_blocks: torch.Tensor,
    index: torch.Tensor,
    nbr_valid: torch.Tensor,
    mu_nbr: torch.Tensor,
    var_nbr: torch.Tensor,
) -> torch.Tensor:
    """HPA KL terms when neighbourhoods share prior blocks (identical geometry, e.g. grids).

    Parameters
    ----------
    cov_blocks : Tensor, shape (S, L, H, H)
        Prior covariance of each distinct neighbourhood geometry (from ``prior_block``).
    index : Tensor of int64, shape (B,)
        The block of every batch location.
    nbr_valid : Tensor of bool, shape (B, H)
    mu_nbr, var_nbr : Tensor, shape (B, H, L)
        Encoder means and variances, listed in the block's slot order.

    Returns
    -------
    Tensor, shape (B,)
        :func:`hpa_kl` on the per-location blocks, with one factorisation per distinct block.
    """
    v = nbr_valid.unsqueeze(1)
    mu = torch.where(v, mu_nbr.mT, 0.0)
    var = torch.where(v, var_nbr.mT, 1.0)
    return _SharedGaussianKL.apply(cov_blocks, index, mu, var).sum(-1)


class _SharedGaussianKL(torch.autograd.Function):
    """:class:`_GaussianKL` with blocks shared between locations; gradients summed per block.

    ``dC = sum_i g_i (C^{-1} - a_i a_i' - C^{-1} S_i C^{-1}) / 2``, formed per block as
    ``(G C^{-1} - sum_i g_i a_i a_i' - C^{-1} diag(sum_i g_i var_i) C^{-1}) / 2``, ``G = sum_i g_i``.
    """

    @staticmethod
    def forward(ctx, cov, index, mu, var):
        chol = checked_cholesky(cov)
        inv_s = torch.cholesky_inverse(chol)
        logdet_s = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        alpha = (inv_s[index] @ mu.unsqueeze(-1)).squeeze(-1)  # (B, L, H)
        quad = (mu * alpha).sum(-1)
        diag_s = torch.diagonal(inv_s, dim1=-2, dim2=-1)  # (S, L, H)
        trace = (diag_s[index] * var).sum(-1)
        ctx.save_for_backward(inv_s, alpha, var, index)
        return 0.5 * (quad + trace + logdet_s[index] - torch.log(var).sum(-1) - mu.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        inv_s, alpha, var, index = ctx.saved_tensors
        g = grad.unsqueeze(-1)  # (B, L, 1)
        d_cov = None
        if ctx.needs_input_grad[0]:
            n_blocks = inv_s.shape[0]
            g_sum = grad.new_zeros((n_blocks, grad.shape[1])).index_add_(0, index, grad)  # (S, L)
            v_sum = var.new_zeros((n_blocks, *var.shape[1:])).index_add_(0, index, g * var)  # (S, L, H)
            outer = (g * alpha).unsqueeze(-1) * alpha.unsqueeze(-2)  # (B, L, H, H)
            a_sum = outer.new_zeros((n_blocks, *outer.shape[1:])).index_add_(0, index, outer)
            inner = g_sum[..., None, None] * inv_s - a_sum - (inv_s * v_sum.unsqueeze(-2)) @ inv_s
            d_cov = 0.5 * inner
        d_mu = g * alpha
        d_var = 0.5 * g * (torch.diagonal(inv_s, dim1=-2, dim2=-1)[index] - 1.0 / var)
        return d_cov, None, d_mu, d_var


class _GaussianKL(torch.autograd.Function):
    """``KL[N(mu, diag var) || N(0, C)]`` per block, with analytic gradients (none through Cholesky).

    With ``a = C^{-1} mu``: ``dC = (C^{-1} - a a' - C^{-1} S C^{-1}) / 2``, ``dmu = a``,
    ``dvar = (diag C^{-1} - 1 / var) / 2``.
    """

    @staticmethod
    def forward(ctx, cov: torch.Tensor, mu: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        chol = checked_cholesky(cov)
        inv = torch.cholesky_inverse(chol)
        alpha = (inv @ mu.unsqueeze(-1)).squeeze(-1)
        quad = (mu * alpha).sum(-1)
        trace = (torch.diagonal(inv, dim1=-2, dim2=-1) * var).sum(-1)
        logdet = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        ctx.save_for_backward(inv, alpha, var)
        return 0.5 * (quad + trace + logdet - torch.log(var).sum(-1) - mu.shape[-1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        inv, alpha, var = ctx.saved_tensors
        g = grad.unsqueeze(-1)
        d_cov = None
        if ctx.needs_input_grad[0]:
            inner = inv - alpha.unsqueeze(-1) * alpha.unsqueeze(-2) - (inv * var.unsqueeze(-2)) @ inv
            d_cov = 0.5 * g.unsqueeze(-1) * inner
        d_mu = g * alpha
        d_var = 0.5 * g * (torch.diagonal(inv, dim1=-2, dim2=-1) - 1.0 / var)
        return d_cov, d_mu, d_var


class HPAPrior:
    """The hierarchical prior of a mini-batch: the KL term of its ELBO.

    The KL on each batch location's H nearest locations (appendix B.1, eq. 8), averaged over the
    batch and divided by N (one neighbourhood KL weighs against N likelihood terms).
    """

    name = "hpa"

    def kl(
        self, kernel: ChannelKernel, batch: Any, mean: torch.Tensor, var: torch.Tensor, jitter: float
    ) -> torch.Tensor:
        """KL estimate per location (a scalar) for ``batch`` (see :meth:`~geogpvae.gp.priors.spa.SPAPrior.kl`)."""
        nbr = batch.nbr_pos
        if batch.stencil_index is not None:
            cov = prior_block(kernel, batch.stencil_offsets, batch.stencil_valid, jitter)
            kl = gaussian_kl_blocks(cov, batch.stencil_index, batch.nbr_valid, take_rows(mean, nbr),
                                    take_rows(var, nbr))
        else:
            kl = hpa_kl(kernel, batch.x_nbr, batch.nbr_valid, take_rows(mean, nbr), take_rows(var, nbr), jitter)
        return kl.mean() / batch.n_total
