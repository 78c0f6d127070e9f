"""Covariance blocks of the latent GP prior on small neighbour sets, and their solves."""

from __future__ import annotations

import torch

from ..kernels import ChannelKernel


def prior_block(
    kernel: ChannelKernel, points: torch.Tensor, valid: torch.Tensor, jitter: float
) -> torch.Tensor:
    """Prior covariance (B, L, M, M) on each set of ``points`` (B, M, D), padded (``valid`` False) decoupled.

    Channel ``l``: ``k_l(x, x') + jitter * s_l * [same point]``, ``s_l`` its outputscale; padding: the identity.
    """
    return finish_block(kernel.blocks(points), kernel, valid, jitter)


def finish_block(cov: torch.Tensor, kernel: ChannelKernel, valid: torch.Tensor, jitter: float) -> torch.Tensor:
    """:func:`prior_block` from the kernel's blocks ``cov`` (B, L, M, M): nugget added, padding decoupled."""
    m = cov.shape[-1]
    eye = torch.eye(m, dtype=cov.dtype, device=cov.device)
    scale = kernel.outputscale[:, None, None]
    cov = cov + (jitter * scale) * eye
    if valid.device.type == "cpu" and bool(valid.all()):
        return cov  # nothing padded (a free check on the CPU)
    pair = (valid.unsqueeze(-1) & valid.unsqueeze(-2)).unsqueeze(1)  # (B, 1, M, M)
    return torch.where(pair, cov, eye)  # padded rows and columns: those of the identity


def checked_cholesky(cov: torch.Tensor, *, eager_check: bool | None = None) -> torch.Tensor:
    """Cholesky factors of a batch of SPD blocks, failures reported without a device sync.

    A non-SPD block raises ``LinAlgError`` with ``eager_check`` (default: on the CPU), else its factor is NaN.
    """
    if eager_check is None:
        eager_check = cov.device.type == "cpu"
    chol, info = torch.linalg.cholesky_ex(cov)
    failed = info > 0
    if eager_check:
        if bool(failed.any()):
            raise torch.linalg.LinAlgError(
                "a prior covariance block is not positive definite; increase jitter or use dtype='float64'"
            )
        return chol
    return torch.where(failed[..., None, None], torch.full_like(chol, float("nan")), chol)


class _SPDSolve(torch.autograd.Function):
    """``u = C^{-1} r`` for SPD ``C``; backward reuses the factor: ``v = C^{-1} g``, ``dC = -v u'``, ``dr = v``."""

    @staticmethod
    def forward(ctx, cov: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
        chol = checked_cholesky(cov)
        u = torch.cholesky_solve(rhs, chol)
        ctx.save_for_backward(chol, u)
        return u

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        chol, u = ctx.saved_tensors
        v = torch.cholesky_solve(grad, chol)
        if u.shape[-1] == 1:  # outer product element by element: the same numbers as bmm, faster
            return -(v * u.mT), v
        return -v @ u.mT, v


def spd_solve(cov: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Solve ``cov @ u = rhs`` for batched SPD ``cov`` (..., M, M) and ``rhs`` (..., M, R)."""
    return _SPDSolve.apply(cov, rhs)
