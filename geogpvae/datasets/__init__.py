"""Real and synthetic data sets as :class:`xarray.Dataset` objects.

Two real data sets are supported, both third-party data that geogpvae never ships:

* **Jura** (Goovaerts 1997): seven heavy-metal concentrations in the topsoil of the Swiss
  Jura at 359 sites, plus a 5,957-node prediction grid. :func:`load_jura`,
  :func:`load_jura_grid`.
* **SPE10 model 2** (Christie & Blunt 2001): porosity and permeability of a
  60 x 220 x 85-cell reservoir model. :func:`load_spe10`.

The loaders read files from a *data directory* (each data set in its own sub-folder,
``<data dir>/jura/`` and ``<data dir>/spe10/``) and check every file they read against the
sha256 (or git blob SHA-1) in :data:`REGISTRY`. The data directory is, in order:

1. the ``data_dir`` argument of the loader;
2. the environment variable ``GEOGPVAE_DATA_DIR``;
3. the ``datasets/`` folder at the top of a geogpvae source checkout, when it holds files
   of the data set asked for;
4. the per-user cache folder ``$XDG_CACHE_HOME/geogpvae`` (``~/.cache/geogpvae``).

:func:`data_home` says which folder that is and :func:`available` which data sets are found.
``datasets/README.md`` in the source tree says where to get the files and how to install them.

:func:`make_gaussian_field` draws synthetic multi-variable Gaussian-process fields with holes,
on a regular grid or on scattered points, for demos and fast tests;
:func:`make_station_network` draws daily space-time series at a network of stations, stored
the CF way (dims ``(time, station)``, ``lat``/``lon`` on ``station``), with outages.
"""

from __future__ import annotations

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
    "make_gaussian_field",
    "make_station_network",
]
