"""User-supplied latent kernels: any stationary gpytorch kernel, saved as a plain description.

``kernel=`` accepts, besides the names of the built-in kernels, a :class:`gpytorch.kernels.Kernel`
instance, for example a Matérn kernel over space times a periodic kernel over time::

    from gpytorch.kernels import MaternKernel, PeriodicKernel, ScaleKernel
    kernel = ScaleKernel(MaternKernel(nu=1.5, ard_num_dims=2, active_dims=[0, 1])
                         * PeriodicKernel(active_dims=[2]))

:class:`GPyTorchLatentKernel` gives each latent channel its own trained copy; the kernel must be
stationary (``kernel.is_stationary``). A saved model holds it as a description
(:func:`kernel_spec`, rebuilt by :func:`kernel_from_spec`), never pickled code; priors and
non-default constraints on its hyperparameters are not saved.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..errors import InputError
from .kernels import ChannelKernel

__all__ = ["GPyTorchLatentKernel", "is_gpytorch_kernel", "kernel_from_spec", "kernel_spec"]

#: Leaf-kernel attributes that are constructor arguments of the same name.
_ARGUMENTS = ("nu", "power", "num_mixtures", "num_dimensions")


def is_gpytorch_kernel(value: Any) -> bool:
    """Whether ``value`` is a gpytorch kernel instance (without importing gpytorch needlessly)."""
    if isinstance(value, (str, bytes)) or value is None:
        return False
    import gpytorch  # only when a kernel object is given

    return isinstance(value, gpytorch.kernels.Kernel)


def _kernels_module() -> Any:
    import gpytorch

    return gpytorch.kernels


def kernel_spec(kernel: Any) -> dict[str, Any]:
    """A plain (JSON-friendly) description of a gpytorch kernel's structure.

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
        Built from classes of ``gpytorch.kernels``, combined with ``+``, ``*`` and
        :class:`~gpytorch.kernels.ScaleKernel`.

    Returns
    -------
    dict
        ``{"class": name, ...}`` with ``base`` (ScaleKernel), ``kernels`` (sums, products) or
        the leaf's ``ard_num_dims``, ``active_dims``, ``batch_shape``, ``nu``, ...

    Raises
    ------
    InputError
        A class not from ``gpytorch.kernels``, or a kernel the description cannot rebuild.
    """
    spec = _describe(kernel)
    _check_rebuilds(kernel, spec)
    return spec


def _describe(kernel: Any) -> dict[str, Any]:
    kernels = _kernels_module()
    name = type(kernel).__name__
    if getattr(kernels, name, None) is not type(kernel):
        raise InputError(
            f"kernel class {type(kernel).__qualname__} is not one of gpytorch.kernels; geogpvae "
            "saves kernels as a description of gpytorch.kernels classes combined with +, * "
            "and ScaleKernel"
        )
    spec: dict[str, Any] = {"class": name}
    if isinstance(kernel, kernels.ScaleKernel):
        spec["base"] = _describe(kernel.base_kernel)
    elif isinstance(kernel, (kernels.ProductKernel, kernels.AdditiveKernel)):
        spec["kernels"] = [_describe(k) for k in kernel.kernels]
    else:
        if kernel.ard_num_dims is not None:
            spec["ard_num_dims"] = int(kernel.ard_num_dims)
        for arg in _ARGUMENTS:
            if hasattr(kernel, arg):
                spec[arg] = getattr(kernel, arg)
    if kernel.active_dims is not None and not isinstance(kernel, (kernels.ProductKernel, kernels.AdditiveKernel)):
        spec["active_dims"] = [int(d) for d in kernel.active_dims.tolist()]
    if len(kernel.batch_shape):
        spec["batch_shape"] = [int(s) for s in kernel.batch_shape]
    return spec


def kernel_from_spec(spec: dict[str, Any]) -> Any:
    """Rebuild a gpytorch kernel (fresh hyperparameters) from :func:`kernel_spec`'s description.

    Raises
    ------
    InputError
        ``spec`` names a class that is not a gpytorch kernel.
    """
    kernels = _kernels_module()
    spec = dict(spec)
    cls = getattr(kernels, str(spec.pop("class")), None)
    if not (isinstance(cls, type) and issubclass(cls, kernels.Kernel)):
        raise InputError(f"saved kernel names an unknown gpytorch kernel class: {cls!r}")
    kwargs: dict[str, Any] = {}
    if "batch_shape" in spec:
        kwargs["batch_shape"] = torch.Size(spec.pop("batch_shape"))
    if "active_dims" in spec:
        kwargs["active_dims"] = tuple(spec.pop("active_dims"))
    if "base" in spec:
        return cls(kernel_from_spec(spec.pop("base")), **kwargs)
    if "kernels" in spec:
        return cls(*[kernel_from_spec(k) for k in spec.pop("kernels")], **kwargs)
    return cls(**spec, **kwargs)


def _check_rebuilds(kernel: Any, spec: dict[str, Any]) -> None:
    rebuilt = kernel_from_spec(spec)
    want = {k: tuple(v.shape) for k, v in kernel.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in rebuilt.state_dict().items()}
    if want != got:
        raise InputError(
            f"the kernel {type(kernel).__name__} cannot be saved and rebuilt from its description "
            "(its constructor takes arguments geogpvae does not record); build it from "
            "gpytorch.kernels classes with their structural arguments only"
        )


def check_user_kernel(kernel: Any, n_dims: int | None = None) -> None:
    """Raise :class:`~geogpvae.errors.InputError` for a kernel geogpvae cannot use.

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
    n_dims : int, optional
        D, the number of coordinates, when known: every ``active_dims`` entry must be < D.
    """
    if not kernel.is_stationary:
        raise InputError(
            f"kernel {type(kernel).__name__} is not stationary; the neighbour priors need a "
            "stationary kernel (RBF, Matérn, periodic, rational quadratic, ... and their "
            "sums, products and ScaleKernel)"
        )
    kernel_spec(kernel)
    if n_dims is not None:
        for module in kernel.modules():
            dims = getattr(module, "active_dims", None)
            if dims is not None and len(dims) and int(dims.max()) >= n_dims:
                raise InputError(
                    f"kernel active_dims {dims.tolist()} reach past the {n_dims} coordinates of "
                    "the model's x (numbered from 0 in the order of the coordinates)"
                )


class GPyTorchLatentKernel(ChannelKernel):
    """L independent copies of a gpytorch kernel, with the interface of the built-in kernels.

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
        A stationary kernel over the D coordinates (not modified: each channel trains a copy).
    n_channels, n_dims : int
        L latent channels, D input dimensions.
    """

    stationary = True

    def __init__(self, kernel: Any, n_channels: int, n_dims: int) -> None:
        super().__init__()
        check_user_kernel(kernel, n_dims)
        self.spec = kernel_spec(kernel)
        self.n_channels, self.n_dims = int(n_channels), int(n_dims)
        self.channels = nn.ModuleList(copy.deepcopy(kernel) for _ in range(self.n_channels))

    @property
    def outputscale(self) -> torch.Tensor:
        """Prior variance ``k_l(x, x)`` of each channel, shape (L,)."""
        param = next(self.parameters(), None)
        dtype = param.dtype if param is not None else torch.get_default_dtype()
        device = param.device if param is not None else None
        x0 = torch.zeros(1, self.n_dims, dtype=dtype, device=device)
        return torch.stack([self._dense(k, x0, x0).reshape(()) for k in self.channels])

    @staticmethod
    def _dense(kernel: Any, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        import gpytorch

        with gpytorch.settings.lazily_evaluate_kernels(False):
            out = kernel(x1, x2)
        return out.to_dense() if hasattr(out, "to_dense") else out

    def _covariance(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return torch.stack([self._dense(k, x1, x2) for k in self.channels], dim=-3)

    def extra_repr(self) -> str:
        return f"n_channels={self.n_channels}, n_dims={self.n_dims}, kernel={self.spec['class']}"
