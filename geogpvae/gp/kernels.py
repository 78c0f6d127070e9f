"""Stationary covariance functions of the L latent GPs, each with its outputscale ``s`` and ARD lengthscales.

:class:`LatentKernel` returns blocks shaped ``(..., L, n, m)``. With ``r^2 = sum_d (x_d - x'_d)^2 / l_d^2``:
rbf ``s exp(-r^2 / 2)``; matern12 ``s exp(-r)``; matern32 ``s (1 + sqrt(3) r) exp(-sqrt(3) r)``;
matern52 ``s (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``; cauchy ``s / (1 + r^2)``.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from .names import KERNELS

__all__ = ["KERNELS", "ChannelKernel", "LatentKernel", "kernel_from_sqdist", "scaled_sqdist", "sqdiff_to_sqdist",
           "stretch_of", "stretchable", "stretched"]


def _softplus_inverse(value: torch.Tensor) -> torch.Tensor:
    # log(exp(v) - 1), stable for large v
    return value + torch.log(-torch.expm1(-value))


def _safe_sqrt(r2: torch.Tensor) -> torch.Tensor:
    """sqrt with a zero gradient at 0 (``r2`` clamped to the smallest normal), so Matern kernels differentiate."""
    return torch.sqrt(torch.clamp_min(r2, torch.finfo(r2.dtype).tiny))


def kernel_from_sqdist(r2: torch.Tensor, kind: str) -> torch.Tensor:
    """Unit-outputscale correlation, same shape as ``r2``, from the scaled squared distance.

    Parameters
    ----------
    r2 : Tensor
        Squared distances over squared lengthscales (dimensionless).
    kind : str
        One of :data:`KERNELS`.

    Returns
    -------
    Tensor
    """
    if kind == "rbf":
        return torch.exp(-0.5 * r2)
    if kind == "cauchy":
        return 1.0 / (1.0 + r2)
    r = _safe_sqrt(r2)
    if kind == "matern12":
        return torch.exp(-r)
    if kind == "matern32":
        a = math.sqrt(3.0) * r
        return (1.0 + a) * torch.exp(-a)
    if kind == "matern52":
        a = math.sqrt(5.0) * r
        return (1.0 + a + a * a / 3.0) * torch.exp(-a)
    raise ValueError(f"unknown kernel {kind!r}; choose one of {', '.join(KERNELS)}")


def scaled_sqdist(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """Squared distances per channel, every input dimension divided by its lengthscale.

    Coincident points are exactly 0 apart (differences, not ``|a|^2 + |b|^2 - 2ab``).

    Parameters
    ----------
    x1 : Tensor, shape (..., n, D)
    x2 : Tensor, shape (..., m, D)
    lengthscale : Tensor, shape (L, D)

    Returns
    -------
    Tensor, shape (..., L, n, m)
    """
    sqdiff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).square()  # (..., n, m, D)
    return sqdiff_to_sqdist(sqdiff, lengthscale)


def sqdiff_to_sqdist(sqdiff: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """Scaled squared distances per channel from squared coordinate differences.

    Parameters
    ----------
    sqdiff : Tensor, shape (..., n, m, D)
    lengthscale : Tensor, shape (L, D)

    Returns
    -------
    Tensor, shape (..., L, n, m)
    """
    r2 = sqdiff @ lengthscale.pow(-2).mT  # (..., n, m, L)
    return r2.movedim(-1, -3).contiguous()  # the kernel's elementwise steps run faster on contiguous blocks


def stretchable(kernel: nn.Module) -> bool:
    """Whether :func:`stretched` can lengthen the kernel's lengthscales (the built-in kernels)."""
    return isinstance(getattr(kernel, "lengthscale_unit", None), torch.Tensor)


#: per thread, the stretch of each kernel (by ``id``) inside :func:`stretched` blocks
_STRETCHES = threading.local()


def stretch_of(kernel: nn.Module) -> float:
    """The factor :func:`stretched` applies to ``kernel``'s lengthscales in this thread.

    Parameters
    ----------
    kernel : torch.nn.Module

    Returns
    -------
    float
        1.0 outside any :func:`stretched` block of this thread.
    """
    return getattr(_STRETCHES, "factors", {}).get(id(kernel), 1.0)


@contextlib.contextmanager
def stretched(kernel: nn.Module, factor: float) -> Iterator[nn.Module]:
    """The kernel with every lengthscale times ``factor`` for the block (no gradient), in this thread only.

    The kernel's tensors are not changed: other threads, and a copy or pickle of the kernel made
    meanwhile (a dask worker sending a model it is predicting with), see it as it is."""
    if factor == 1.0:
        yield kernel
        return
    if not stretchable(kernel):
        raise ValueError("only the built-in kernels' lengthscales can be stretched")
    factors = _STRETCHES.__dict__.setdefault("factors", {})
    before = factors.get(id(kernel))
    factors[id(kernel)] = factor * (1.0 if before is None else before)
    try:
        yield kernel
    finally:
        if before is None:
            del factors[id(kernel)]
        else:
            factors[id(kernel)] = before


class ChannelKernel(nn.Module):
    """What the priors and the predictive need of a latent kernel: L covariance blocks at once.

    Base of :class:`LatentKernel` and :class:`~geogpvae.gp.user_kernels.GPyTorchLatentKernel`.
    A subclass sets ``n_channels`` (L) and ``n_dims`` (D), an ``outputscale`` property (the prior
    variance ``k_l(x, x)``, shape (L,)) and implements ``_covariance(x1, x2)``.
    """

    n_channels: int
    n_dims: int

    def forward(self, x1: torch.Tensor, x2: torch.Tensor | None = None) -> torch.Tensor:
        """Covariance blocks for every channel.

        Parameters
        ----------
        x1 : Tensor, shape (..., n, D)
        x2 : Tensor, shape (..., m, D), optional
            Defaults to ``x1``.

        Returns
        -------
        Tensor, shape (..., L, n, m)
        """
        return self._covariance(x1, x1 if x2 is None else x2)

    def blocks(self, points: torch.Tensor) -> torch.Tensor:
        """Covariance of each set of points, shape (..., L, M, M), for points (..., M, D)."""
        return self.forward(points)

    def _covariance(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class LatentKernel(ChannelKernel):
    """Independent stationary kernels for L latent channels over D-dimensional inputs.

    The lengthscale trains as the log of its ratio to the initial one, so units do not matter.

    Parameters
    ----------
    kind : str
        Covariance family, one of :data:`KERNELS`.
    n_channels, n_dims : int
        L latent channels, D input dimensions.
    lengthscale : float or sequence of float
        Initial lengthscale in input units: scalar, per dimension (D) or per channel (L, D).
    outputscale : float or sequence of float
        Initial outputscale (prior variance), scalar or one per channel.
    learn_lengthscale, learn_outputscale : bool
        Whether the hyperparameters are trained or frozen.
    """

    def __init__(
        self,
        kind: str,
        n_channels: int,
        n_dims: int,
        *,
        lengthscale: float | Sequence[float] | torch.Tensor = 1.0,
        outputscale: float | Sequence[float] | torch.Tensor = 1.0,
        learn_lengthscale: bool = True,
        learn_outputscale: bool = True,
    ) -> None:
        super().__init__()
        if kind not in KERNELS:
            raise ValueError(f"unknown kernel {kind!r}; choose one of {', '.join(KERNELS)}")
        self.kind = kind
        self.n_channels = int(n_channels)
        self.n_dims = int(n_dims)
        ls = torch.as_tensor(lengthscale, dtype=torch.get_default_dtype())
        ls = torch.broadcast_to(ls, (self.n_channels, self.n_dims)).clone()
        os_ = torch.as_tensor(outputscale, dtype=torch.get_default_dtype())
        os_ = torch.broadcast_to(os_, (self.n_channels,)).clone()
        if (ls <= 0).any() or (os_ <= 0).any():
            raise ValueError("lengthscale and outputscale must be positive")
        self.register_buffer("lengthscale_unit", ls.clone())
        raw_ls, raw_os = torch.zeros_like(ls), _softplus_inverse(os_)
        if learn_lengthscale:
            self.raw_lengthscale = nn.Parameter(raw_ls)
        else:
            self.register_buffer("raw_lengthscale", raw_ls)
        if learn_outputscale:
            self.raw_outputscale = nn.Parameter(raw_os)
        else:
            self.register_buffer("raw_outputscale", raw_os)

    @property
    def lengthscale(self) -> torch.Tensor:
        """Lengthscales, shape (L, D), in input units (times :func:`stretch_of` the kernel)."""
        factor = stretch_of(self)
        unit = self.lengthscale_unit if factor == 1.0 else self.lengthscale_unit.detach() * factor
        return unit * torch.exp(self.raw_lengthscale)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # models saved before the unit existed stored softplus^-1(lengthscale): convert
        if prefix + "lengthscale_unit" not in state_dict and prefix + "raw_lengthscale" in state_dict:
            old = state_dict[prefix + "raw_lengthscale"]
            state_dict[prefix + "raw_lengthscale"] = torch.log(F.softplus(old))
            state_dict[prefix + "lengthscale_unit"] = torch.ones_like(old)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def outputscale(self) -> torch.Tensor:
        """Outputscales (prior variances), shape (L,)."""
        return F.softplus(self.raw_outputscale)

    def _covariance(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return self.from_sqdiff((x1.unsqueeze(-2) - x2.unsqueeze(-3)).square())

    def blocks(self, points: torch.Tensor) -> torch.Tensor:
        """Covariance (..., L, M, M) of each set of points (..., M, D); no gradient to the coordinates."""
        with torch.no_grad():
            sqdiff = (points.unsqueeze(-2) - points.unsqueeze(-3)).square()
        return self.from_sqdiff(sqdiff)

    def from_sqdiff(self, sqdiff: torch.Tensor) -> torch.Tensor:
        """Covariance blocks (..., L, n, m) from squared coordinate differences (..., n, m, D)."""
        r2 = sqdiff_to_sqdist(sqdiff, self.lengthscale)
        return self.outputscale[:, None, None] * kernel_from_sqdist(r2, self.kind)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, n_channels={self.n_channels}, n_dims={self.n_dims}"
