"""geogpvae: fill the holes in spatial fields with neighbour-driven GP variational autoencoders.

Main entry points
-----------------
impute, GPVAEImputer
    xarray in, imputed fields and their uncertainty out.
to_netcdf, open_dataset
    CF-tidy, compressed, atomic NetCDF output; lazy multi-file input.
datasets
    Jura and SPE10 loaders and synthetic Gaussian fields.
plot
    Layer slices, maps and uncertainty panels.
GPVAEEngine, GPVAEConfig
    The engines on plain arrays.
"""

from . import accessor, datasets  # noqa: F401  (accessor registers ds.gpvae)
from ._version import __version__
from .api import GPVAEImputer, impute
from .engine.config import GPVAEConfig
from .engine.core import GPVAEEngine
from .errors import InputError
from .fields.io import open_dataset, to_netcdf

__all__ = [
    "__version__",
    "GPVAEConfig",
    "GPVAEEngine",
    "GPVAEImputer",
    "InputError",
    "datasets",
    "impute",
    "open_dataset",
    "to_netcdf",
]
