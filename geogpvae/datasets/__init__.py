"""Real and synthetic data sets as :class:`xarray.Dataset` objects.

Real, third-party data that geogpvae never ships, read from a data directory (:func:`data_home`)
and checked against :data:`REGISTRY`: the Jura topsoil metals (Goovaerts 1997; :func:`load_jura`,
:func:`load_jura_grid`) SPE10 model 2 (Christie & Blunt 2001; :func:`load_spe10`) and five surveys of the gstat R package
(:func:`load_gstat`);
``datasets/README.md`` says where to get them. Synthetic: :func:`make_gaussian_field` (gridded or
scattered GP fields with holes) and :func:`make_station_network` (daily station series with outages).
"""

from __future__ import annotations

from .gstat import GSTAT_SURVEYS, load_gstat
from .jura import JURA_LANDUSE, JURA_METALS, JURA_ROCK, decode_flags, load_jura, load_jura_grid
from .registry import (
    REGISTRY,
    ChecksumError,
    DataFile,
    DataFileNotFoundError,
    available,
    data_home,
    verify_file,
)
from .spe10 import MILLIDARCY, SPE10_CELL_SIZE, SPE10_SHAPE, load_spe10
from .stations import make_station_network
from .synthetic import make_gaussian_field

__all__ = [
    "DataFile",
    "REGISTRY",
    "JURA_LANDUSE",
    "JURA_ROCK",
    "JURA_METALS",
    "SPE10_SHAPE",
    "SPE10_CELL_SIZE",
    "MILLIDARCY",
    "DataFileNotFoundError",
    "ChecksumError",
    "data_home",
    "available",
    "verify_file",
    "decode_flags",
    "load_jura",
    "load_jura_grid",
    "load_spe10",
    "GSTAT_SURVEYS",
    "load_gstat",
    "make_gaussian_field",
    "make_station_network",
]
