"""geogpvae: fill the holes in spatial fields with neighbour-driven GP variational autoencoders.

Main entry points
-----------------
impute, GPVAEImputer
    xarray in, imputed fields and their uncertainty out.
GPVAERegressor
    numpy in and out, a scikit-learn estimator (needs scikit-learn).
simulate
    Equally likely filled fields, drawn jointly (conditional realisations).
validate
    Hold out a share of the observed values, impute, and score the imputation and its intervals.
to_netcdf, to_zarr, open_dataset
    CF-tidy, compressed, atomic NetCDF and Zarr output; lazy multi-file and Zarr input.
datasets
    Jura and SPE10 loaders and synthetic Gaussian fields.
plot
    Layer slices, maps and uncertainty panels.
GPVAEEngine, GPVAEConfig
    The engines on plain arrays.

``import geogpvae`` registers the ``ds.gpvae`` accessor and imports nothing heavy: torch and
matplotlib are imported when a name that needs them is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import accessor  # noqa: F401  (registers ds.gpvae; needs xarray only)
from ._version import __version__
from .errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from . import datasets, plot
    from .api import GPVAEImputer, impute, simulate
    from .engine.config import GPVAEConfig
    from .engine.core import GPVAEEngine
    from .fields.io import open_dataset, to_netcdf
    from .fields.zarr_io import to_zarr
    from .sklearn import GPVAERegressor
    from .validation import validate

#: Public names imported on first use: name -> (module, attribute or None for the module).
_LAZY: dict[str, tuple[str, str | None]] = {
    "impute": (".api", "impute"),
    "simulate": (".api", "simulate"),
    "validate": (".validation", "validate"),
    "GPVAEImputer": (".api", "GPVAEImputer"),
    "GPVAERegressor": (".sklearn", "GPVAERegressor"),
    "GPVAEConfig": (".engine.config", "GPVAEConfig"),
    "GPVAEEngine": (".engine.core", "GPVAEEngine"),
    "open_dataset": (".fields.io", "open_dataset"),
    "to_netcdf": (".fields.io", "to_netcdf"),
    "to_zarr": (".fields.zarr_io", "to_zarr"),
    "datasets": (".datasets", None),
    "plot": (".plot", None),
}

__all__ = [
    "__version__",
    "GPVAEConfig",
    "GPVAEEngine",
    "GPVAEImputer",
    "GPVAERegressor",
    "InputError",
    "datasets",
    "impute",
    "open_dataset",
    "plot",
    "simulate",
    "to_netcdf",
    "to_zarr",
    "validate",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = importlib.import_module(module, __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
