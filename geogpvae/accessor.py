"""The ``.gpvae`` accessor on xarray Datasets, registered on import (``import geogpvae`` does it)::

    filled = ds.gpvae.impute(...)
    fig = filled.gpvae.plot_layers("kx", layer=[1, 5])
    fig = filled.gpvae.plot_map("zn")
    fig = filled.gpvae.plot_uncertainty("zn", truth=truth)

Matplotlib, cartopy and the modelling code are imported only when a method is called.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import xarray as xr

__all__ = ["GPVAEAccessor"]


class _Forward:
    """A method of the accessor that calls ``module.name(ds, ...)``, imported on first lookup,
    with the target's docstring and signature."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr

    def target(self) -> Callable[..., Any]:
        """The function this method forwards to."""
        return getattr(importlib.import_module(self.module), self.name)

    def __get__(self, accessor: GPVAEAccessor | None, owner: type | None = None) -> Any:
        func = self.target()
        if accessor is None:
            return func
        ds = accessor._ds

        @functools.wraps(func)
        def method(*args: Any, **kwargs: Any) -> Any:
            return func(ds, *args, **kwargs)

        method.__name__ = method.__qualname__ = self.attr
        signature = inspect.signature(func)
        method.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=list(signature.parameters.values())[1:]
        )
        return method


@xr.register_dataset_accessor("gpvae")
class GPVAEAccessor:
    """Imputation and plots for a Dataset, as ``ds.gpvae``.

    Each method is a function with this Dataset as its first argument: ``impute``
    :func:`geogpvae.api.impute`, ``simulate`` :func:`geogpvae.api.simulate`, ``validate``
    :func:`geogpvae.validation.validate`, ``plot_layers``
    :func:`geogpvae.plot.layers`, ``plot_map`` :func:`geogpvae.plot.field_map`, ``plot_uncertainty``
    :func:`geogpvae.plot.uncertainty`, ``plot_residual_variogram``
    :func:`geogpvae.plot.residual_variogram`.

    Parameters
    ----------
    ds : xarray.Dataset
        The Dataset the accessor is attached to.
    """

    impute = _Forward("geogpvae.api", "impute")
    simulate = _Forward("geogpvae.api", "simulate")
    validate = _Forward("geogpvae.validation", "validate")
    plot_layers = _Forward("geogpvae.plot", "layers")
    plot_map = _Forward("geogpvae.plot", "field_map")
    plot_uncertainty = _Forward("geogpvae.plot", "uncertainty")
    plot_residual_variogram = _Forward("geogpvae.plot", "residual_variogram")

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds
