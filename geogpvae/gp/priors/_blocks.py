"""Covariance blocks of the latent GP prior on small neighbour sets, and their solves."""

from __future__ import annotations

import torch

from ..kernels import ChannelKernel


def prior_block(
    kernel: ChannelKernel, points: torch.Tensor, valid: torch.Tensor, jitter: float
) -> torch.Tensor:
    """Prior covariance on each set of points, padded entries decoupled.

    The prior of the latent channel ``l`` is the kernel plus a nugget on the diagonal,
    ``k_l(x, x') + jitter * s_l * [same point]``, with ``s_l`` the channel's outputscale. The
    nugget is part of the model (it is used identically in every engine and in the dense
    reference), so the neighbour approximations stay exact where they should be.

    Parameters
    ----------
    kernel : ChannelKernel
    points : Tensor, shape (B, M, D)
        Locations of each set; padded slots may hold anything finite.
    valid : Tensor of bool, shape (B, M)
        False at padded slots.
    jitter : float
        Relative nugget.

    Returns
    -------
    Tensor, shape (B, L, M, M)
        Covariances; rows and columns of padded slots are those of the identity, so they are
        independent of everything else and contribute nothing to conditionals or KL terms.
    """
    return finish_block(kernel.blocks(points), kernel, valid, jitter)


def finish_block(cov: torch.Tensor, kernel: ChannelKernel, valid: torch.Tensor, jitter: float) -> torch.Tensor:
    """:func:`prior_block` from the kernel's covariance blocks ``cov`` (B, L, M, M): the nugget
    on the diagonal and the padded slots decoupled."""
    m = cov.shape[-1]
    eye = torch.eye(m, dtype=cov.dtype, device=cov.device)
    scale = kernel.outputscale[:, None, None]
    cov = cov + (jitter * scale) * eye
    if valid.device.type == "cpu" and bool(valid.all()):
        return cov  # nothing padded: the decoupling below would change no value (a free check on the CPU)
    pair = (valid.unsqueeze(-1) & valid.unsqueeze(-2)).unsqueeze(1)  # (B, 1, M, M)
    return torch.where(pair, cov, eye)  # padded rows and columns: those of the identity


def checked_cholesky(cov: torch.Tensor, *, eager_check: bool | None = None) -> torch.Tensor:
    """Cholesky factors of a batch of SPD blocks, with failures reported without a device sync.

    A block that is not positive definite raises at once with ``eager_check`` (default: on
    the CPU, where the check costs nothing); otherwise (accelerators, where reading the flag
    back would stall the device every step) its factor is NaN, so the loss turns NaN and the
    epoch's finiteness check reports it.
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
    """``u = C^{-1} r`` for symmetric positive definite ``C``, with a cheap backward.

    Autograd through a Cholesky factorisation costs several triangular solves with matrix
    right-hand sides; the adjoint of a linear solve needs one more solve with a vector:
    ``v = C^{-1} g``, ``dC = -v u'``, ``dr = v``. The factor from the forward pass is reused.
    """

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
        if u.shape[-1] == 1:  # an outer product: element by element (the same numbers as bmm, faster)
            return -(v * u.mT), v
        return -v @ u.mT, v


def spd_solve(cov: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Solve ``cov @ u = rhs`` for batched SPD ``cov`` (..., M, M) and ``rhs`` (..., M, R)."""
    return _SPDSolve.apply(cov, rhs)
