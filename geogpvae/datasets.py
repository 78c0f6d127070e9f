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
on a regular grid or on scattered points, for demos and fast tests.
"""

from __future__ import annotations

import csv
import hashlib
import io
import operator
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import xarray as xr

from geogpvae.synthetic import grid_points, make_field

__all__ = [
    "DataFile",
    "REGISTRY",
    "JURA_LANDUSE",
    "JURA_ROCK",
    "JURA_METALS",
    "SPE10_SHAPE",
    "SPE10_CELL_SIZE",
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
]

# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataFile:
    """One known data file and how to check it.

    Attributes
    ----------
    dataset : str
        Data set, which is also the sub-folder of the data directory: ``"jura"`` or
        ``"spe10"``.
    name : str
        File name inside that sub-folder.
    size : int or None
        Size in bytes, or None where it is not known.
    sha256 : str or None
        Lower-case hex sha256 of the whole file, or None where it is not known.
    git_blob_sha1 : str or None
        Git blob id, ``sha1(b"blob <size>\\0" + content)``; used to check the file when
        ``sha256`` is None.
    description : str
        What the file is.
    """

    dataset: str
    name: str
    size: int | None
    sha256: str | None
    git_blob_sha1: str | None
    description: str

    @property
    def key(self) -> str:
        """Registry key, ``"<dataset>/<name>"``."""
        return f"{self.dataset}/{self.name}"


def _entries(*files: DataFile) -> dict[str, DataFile]:
    return {f.key: f for f in files}


#: Every known data file, keyed by ``"<dataset>/<file name>"``. Checksums are those of the
#: reference copies described in ``datasets/README.md``.
REGISTRY: dict[str, DataFile] = _entries(
    DataFile(
        "jura", "jura_pred.csv", 17733,
        "b8807dad4c97c74dd2d83d011fe1f2735468de7a62953c00e71bad7187a20e98", None,
        "Jura prediction set (gstat jura.pred), 259 sites: "
        "Xloc,Yloc,Landuse,Rock,Cd,Co,Cr,Cu,Ni,Pb,Zn; land use and rock as labels",
    ),
    DataFile(
        "jura", "jura_val.csv", 6891,
        "92b64546dda8a803ddc73a91c22f65c419b0f071eb45b21b8e1dabe45f14f4ca", None,
        "Jura validation set (gstat jura.val), 100 sites, same columns as jura_pred.csv",
    ),
    DataFile(
        "jura", "jura_grid.csv", 162897,
        "581c562a1341fdfb84454342df4ba0fe73129e052cd91785e7182466d67b227b", None,
        "Jura prediction grid (gstat jura.grid), 5957 nodes: Xloc,Yloc,Landuse,Rock",
    ),
    DataFile(
        "jura", "jura_pred_lonlat.csv", 12445,
        "274c28f9f5475f16530318ed075df2a69cc20b1211d3a06444a39937d6998554", None,
        "WGS84 long/lat of the 259 prediction sites: Xloc,Yloc,long,lat",
    ),
    DataFile(
        "jura", "jura_val_lonlat.csv", 4833,
        "819be413f161c2c4e4aa7749d7ceb07d1f5d0a0fe31161f2390e3f8611de5f93", None,
        "WGS84 long/lat of the 100 validation sites: Xloc,Yloc,long,lat",
    ),
    DataFile(
        "jura", "jura_grid_lonlat.csv", 269457,
        "8514e01180939ab74c3723704946be77e0bebfb72373918966401a3f41b25f7b", None,
        "WGS84 long/lat of the 5957 grid nodes: Xloc,Yloc,long,lat",
    ),
    DataFile(
        "jura", "prediction_dat.csv", 14042,
        "afd7e84b5762424a145c4ce15648245ae696612e81ae8da891289d5cef9796e8", None,
        "gstat prediction.dat: the 259 prediction sites with integer Landuse/Rock codes",
    ),
    DataFile(
        "jura", "validation_dat.csv", 5453,
        "8dfe16fd3fd8139b5d35e8e95a751097c1a05fcdf1ed9ea7a66b4eac5abc102d", None,
        "gstat validation.dat: the 100 validation sites with integer Landuse/Rock codes",
    ),
    DataFile(
        "jura", "transect_dat.csv", 2452,
        "d9a309ede1873d2fcd0fc8081a7919c0003f8af2b9df2353eae56498efc896eb", None,
        "gstat transect.dat: X,Rock.type,Block.Ni,Cd,Ni; NA marks a missing value",
    ),
    DataFile(
        "jura", "jura.rda", 73612,
        "fe9453817834fc9e9431d6b3aae231085b90f61346918db075c8a9354aedc5ef", None,
        "original R data file of gstat 2.1-0 (Debian r-cran-gstat 2.1-0-1); not read by "
        "geogpvae",
    ),
    DataFile(
        "spe10", "spe10.npz", 26279968,
        "72d647b4f97bb0ba7251417129d77689a11d6fb43e7c7a8ab1e98bbd5d17e590", None,
        "SPE10 model 2 as np.savez_compressed arrays phi, kx, ky, kz; float64, "
        "shape (85, 220, 60) = (z, y, x); porosity fraction, permeability mD",
    ),
    DataFile(
        "spe10", "spe_phi.dat", 19121390,
        "53f95e004a0803b04293539e0b1d5f82f2d25d341ca300cb117f1414d9dc7d8a",
        "3f4c10b173eb9d4a7eba44ca2069b86b9868639b",
        "original SPE10 porosity text file: 1,122,000 values, x fastest, then y, then z",
    ),
    DataFile(
        "spe10", "spe_perm.dat", None, None,
        "413e51271fba9410dbbe02eb255729b62d63d846",
        "original SPE10 permeability text file (mD): three whole blocks kx, ky, kz of "
        "1,122,000 values each, x fastest, then y, then z",
    ),
)

_JURA_FILES = (
    "jura_pred.csv", "jura_val.csv", "jura_pred_lonlat.csv", "jura_val_lonlat.csv",
)
_JURA_GRID_FILES = ("jura_grid.csv", "jura_grid_lonlat.csv")
_SPE10_NPZ = "spe10.npz"
_SPE10_DAT = ("spe_phi.dat", "spe_perm.dat")

#: Land-use codes of the Jura data (gstat ``prediction.dat``), code -> label.
JURA_LANDUSE: dict[int, str] = {1: "Forest", 2: "Pasture", 3: "Meadow", 4: "Tillage"}
#: Rock-type codes of the Jura data (gstat ``prediction.dat``), code -> label.
JURA_ROCK: dict[int, str] = {
    1: "Argovian", 2: "Kimmeridgian", 3: "Sequanian", 4: "Portlandian", 5: "Quaternary",
}
#: The seven metals of the Jura data, symbol -> element name.
JURA_METALS: dict[str, str] = {
    "Cd": "cadmium", "Co": "cobalt", "Cr": "chromium", "Cu": "copper",
    "Ni": "nickel", "Pb": "lead", "Zn": "zinc",
}
_JURA_COLUMNS = ("Xloc", "Yloc", "Landuse", "Rock", *JURA_METALS)
_JURA_GRID_COLUMNS = ("Xloc", "Yloc", "Landuse", "Rock")
_LONLAT_COLUMNS = ("Xloc", "Yloc", "long", "lat")

#: SPE10 model 2 array shape, (nz, ny, nx) = (85, 220, 60); layer 1 is index 0.
SPE10_SHAPE: tuple[int, int, int] = (85, 220, 60)
#: SPE10 cell size in metres along z, y, x (2 ft, 10 ft, 20 ft).
SPE10_CELL_SIZE: dict[str, float] = {"z": 0.6096, "y": 3.048, "x": 6.096}
_SPE10_TARBERT_LAYERS = 35  # layers 1-35 Tarbert, 36-85 Upper Ness
_SPE10_VARIABLES = ("porosity", "kx", "ky", "kz")

_WHERE_PUBLISHED = {
    "jura": (
        "The Jura data are published with the gstat R package (CRAN, "
        "https://cran.r-project.org/package=gstat): in R, `library(gstat); data(jura)`; the "
        "file is data/jura.rda in gstat's sources. Convert jura.rda to the CSV files "
        "exactly as shown in datasets/README.md of the geogpvae source tree (the checksums "
        "only match files written that way)."
    ),
    "spe10": (
        "The SPE10 model 2 data are published in the SPE Comparative Solution Project "
        "archive por_perm_case2a.zip (Tenth SPE CSP, Christie & Blunt 2001, "
        "https://www.spe.org/web/csp/datasets/set02.htm). Unzip spe_phi.dat and "
        "spe_perm.dat from it without line-ending conversion (not `unzip -a`); see "
        "datasets/README.md of the geogpvae source tree."
    ),
}

# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class DataFileNotFoundError(FileNotFoundError):
    """A data file is not in the data directory.

    The message says where files are looked for, where to put them and where they are
    published. ``path`` is the missing file (or folder).
    """

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class ChecksumError(ValueError):
    """A data file does not have the expected checksum (or size).

    Attributes
    ----------
    path : pathlib.Path
        The file.
    algorithm : str
        ``"sha256"``, ``"git-blob-sha1"`` or ``"size"``.
    expected, found : str
        Expected and found values.
    """

    def __init__(self, message: str, path: Path, algorithm: str, expected: str,
                 found: str) -> None:
        super().__init__(message)
        self.path = path
        self.algorithm = algorithm
        self.expected = expected
        self.found = found


# --------------------------------------------------------------------------------------
# Data directory
# --------------------------------------------------------------------------------------

_ENV_VAR = "GEOGPVAE_DATA_DIR"
#: ``datasets/`` at the top of a source checkout (unused when it holds no data files).
_REPO_DATA_DIR = Path(__file__).resolve().parents[1] / "datasets"
_DATASETS = ("jura", "spe10")


def _cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "geogpvae"


def _check_dataset(dataset: str) -> str:
    if dataset not in _DATASETS:
        raise ValueError(f"unknown data set {dataset!r}; choose one of {list(_DATASETS)}")
    return dataset


def _holds(folder: Path, dataset: str) -> bool:
    """Whether ``folder/<dataset>`` holds any registered file of the data set."""
    sub = folder / dataset
    return any(
        (sub / f.name).is_file() for f in REGISTRY.values() if f.dataset == dataset
    )


def _resolve_root(dataset: str | None, data_dir: str | Path | None) -> tuple[Path, str]:
    """Data directory and how it was chosen (argument, environment, repository, cache)."""
    if data_dir is not None:
        return Path(data_dir).expanduser(), "the data_dir argument"
    env = os.environ.get(_ENV_VAR)
    if env:
        return Path(env).expanduser(), f"${_ENV_VAR}"
    datasets = _DATASETS if dataset is None else (dataset,)
    if any(_holds(_REPO_DATA_DIR, d) for d in datasets):
        return _REPO_DATA_DIR, "the repository's datasets/ folder"
    return _cache_dir(), "the per-user cache folder"


def data_home(dataset: str | None = None, data_dir: str | Path | None = None) -> Path:
    """Folder in which the loaders look for data files.

    The data directory is, in order: ``data_dir``; the environment variable
    ``GEOGPVAE_DATA_DIR``; the ``datasets/`` folder of a geogpvae source checkout when it
    holds files of the data set (any data set when ``dataset`` is None); else the per-user
    cache folder ``$XDG_CACHE_HOME/geogpvae`` (default ``~/.cache/geogpvae``). Nothing is
    created.

    Parameters
    ----------
    dataset : {"jura", "spe10"} or None
        When given, return that data set's sub-folder of the data directory (where its
        files go); else the data directory itself.
    data_dir : str or Path, optional
        Explicit data directory; it wins over everything else.

    Returns
    -------
    pathlib.Path
        ``<data dir>/<dataset>`` or ``<data dir>``.

    Examples
    --------
    >>> from geogpvae.datasets import data_home
    >>> data_home("jura", data_dir="/data")
    PosixPath('/data/jura')
    """
    if dataset is not None:
        _check_dataset(dataset)
    root, _ = _resolve_root(dataset, data_dir)
    return root / dataset if dataset is not None else root


def _search_order_text() -> str:
    return (
        f"geogpvae looks for data in <data dir>/<data set>/, where <data dir> is the first "
        f"of: the data_dir argument; ${_ENV_VAR}; the datasets/ folder of a source "
        f"checkout ({_REPO_DATA_DIR}) when it holds the files; the cache folder "
        f"({_cache_dir()})."
    )


def _not_found(
    dataset: str, folder: Path, how: str, missing: Sequence[str]
) -> DataFileNotFoundError:
    if not folder.is_dir():
        what = f"the folder {folder} does not exist"
    else:
        what = f"{folder} lacks " + ", ".join(missing)
    msg = (
        f"{dataset} data not found: {what} (data directory chosen from {how}).\n"
        f"{_search_order_text()}\n"
        f"Put the files in {folder}, or in <dir>/{dataset}/ with {_ENV_VAR}=<dir>, or pass "
        f"data_dir=<dir>.\n{_WHERE_PUBLISHED[dataset]}"
    )
    return DataFileNotFoundError(msg, folder if not folder.is_dir() else folder / missing[0])


def _require(dataset: str, data_dir: str | Path | None, names: Sequence[str]) -> dict[str, Path]:
    root, how = _resolve_root(dataset, data_dir)
    folder = root / dataset
    paths = {n: folder / n for n in names}
    missing = [n for n, p in paths.items() if not p.is_file()]
    if missing:
        raise _not_found(dataset, folder, how, missing)
    return paths


def available(data_dir: str | Path | None = None) -> dict[str, Path | None]:
    """Which real data sets are found, and where.

    Only the presence of the files a loader needs is checked, not their checksums (the
    loaders check those).

    Parameters
    ----------
    data_dir : str or Path, optional
        Explicit data directory (see :func:`data_home`).

    Returns
    -------
    dict
        Data set name -> the folder holding it, or None where it is not found. Keys:
        ``"jura"`` (:func:`load_jura`), ``"jura_grid"`` (:func:`load_jura_grid`),
        ``"spe10"`` (:func:`load_spe10`: ``spe10.npz`` or both ``.dat`` files).
    """
    out: dict[str, Path | None] = {}
    wants = {
        "jura": ("jura", [_JURA_FILES]),
        "jura_grid": ("jura", [_JURA_GRID_FILES]),
        "spe10": ("spe10", [(_SPE10_NPZ,), _SPE10_DAT]),
    }
    for label, (dataset, alternatives) in wants.items():
        folder = data_home(dataset, data_dir)
        ok = any(all((folder / n).is_file() for n in names) for names in alternatives)
        out[label] = folder if ok else None
    return out


# --------------------------------------------------------------------------------------
# Checksums
# --------------------------------------------------------------------------------------

# (resolved path, size, mtime_ns, algorithm) -> hex digest found; per process
_DIGESTS: dict[tuple[str, int, int, str], str] = {}
_DIGESTS_LOCK = threading.Lock()
_CHUNK = 1 << 20


def _algorithm(entry: DataFile) -> tuple[str, str]:
    if entry.sha256 is not None:
        return "sha256", entry.sha256.lower()
    if entry.git_blob_sha1 is not None:
        return "git-blob-sha1", entry.git_blob_sha1.lower()
    raise ValueError(f"registry entry {entry.key} has no checksum")


def _new_hash(algorithm: str, size: int) -> Any:  # a hashlib hash object
    if algorithm == "sha256":
        return hashlib.sha256()
    h = hashlib.sha1()  # git blob id, not a security measure
    h.update(b"blob %d\0" % size)
    return h


def _lookup(key: str | None, path: Path) -> DataFile:
    if key is None:
        key = f"{path.parent.name}/{path.name}"
    try:
        return REGISTRY[key]
    except KeyError:
        raise KeyError(
            f"{key!r} is not a registered data file; known: {sorted(REGISTRY)}"
        ) from None


def _check(path: Path, entry: DataFile, data: bytes | None = None) -> None:
    """Verify ``path`` (or its already-read ``data``) against ``entry``, with caching."""
    st = path.stat()
    algorithm, expected = _algorithm(entry)
    advice = (
        f"The file is damaged, incomplete or a different version. Delete it and install it "
        f"again as described in datasets/README.md of the geogpvae source tree.\n"
        f"{_WHERE_PUBLISHED.get(entry.dataset, '')}"
    )
    size = st.st_size if data is None else len(data)
    if entry.size is not None and size != entry.size:
        raise ChecksumError(
            f"{entry.name} at {path} has {size} bytes; expected {entry.size} bytes.\n{advice}",
            path, "size", str(entry.size), str(size),
        )
    cache_key = (str(path.resolve()), st.st_size, st.st_mtime_ns, algorithm)
    with _DIGESTS_LOCK:
        found = _DIGESTS.get(cache_key)
    if found is None:
        h = _new_hash(algorithm, size)
        if data is not None:
            h.update(data)
        else:
            with open(path, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
        found = h.hexdigest()
        if data is None or len(data) == st.st_size:
            with _DIGESTS_LOCK:
                _DIGESTS[cache_key] = found
    if found != expected:
        raise ChecksumError(
            f"{entry.name} at {path} has {algorithm} {found}; expected {expected}.\n{advice}",
            path, algorithm, expected, found,
        )


def verify_file(path: str | Path, key: str | None = None) -> Path:
    """Check a data file against :data:`REGISTRY`.

    The sha256 is checked where it is known, else the git blob SHA-1. Results are cached
    per process by path, size and modification time, so a file is hashed once.

    Parameters
    ----------
    path : str or Path
        The file.
    key : str, optional
        Registry key ``"<dataset>/<file name>"``; by default the file's parent folder name
        and file name, e.g. ``".../jura/jura_pred.csv"`` -> ``"jura/jura_pred.csv"``.

    Returns
    -------
    pathlib.Path
        ``path``, once checked.

    Raises
    ------
    KeyError
        The file is not registered.
    FileNotFoundError
        The file does not exist.
    ChecksumError
        The size or checksum differs from the registry's.
    """
    path = Path(path).expanduser()
    _check(path, _lookup(key, path))
    return path


def _read_verified(path: Path, key: str) -> bytes:
    """Read a whole file and verify the bytes read against the registry."""
    data = path.read_bytes()
    _check(path, REGISTRY[key], data)
    return data


# --------------------------------------------------------------------------------------
# Jura
# --------------------------------------------------------------------------------------


def _read_csv(data: bytes, name: str, columns: Sequence[str]) -> dict[str, list[str]]:
    """Parse CSV text with a known header into columns of strings."""
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    if not rows or tuple(rows[0]) != tuple(columns):
        got = rows[0] if rows else []
        raise ValueError(f"{name}: expected header {','.join(columns)}, found {','.join(got)}")
    body = rows[1:]
    for i, row in enumerate(body, start=2):
        if len(row) != len(columns):
            raise ValueError(f"{name}, line {i}: expected {len(columns)} fields, found {len(row)}")
    return {c: [r[j] for r in body] for j, c in enumerate(columns)}


def _floats(values: list[str], name: str, column: str) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"{name}, column {column}: {err}") from None


def _codes(labels: list[str], mapping: dict[int, str], name: str, column: str) -> np.ndarray:
    inverse = {v: k for k, v in mapping.items()}
    out = np.empty(len(labels), dtype=np.int8)
    for i, lab in enumerate(labels):
        try:
            out[i] = inverse[lab]
        except KeyError:
            raise ValueError(
                f"{name}, row {i + 1}: unknown {column} label {lab!r}; known: {list(inverse)}"
            ) from None
    return out


def _read_table(path: Path, key: str, columns: Sequence[str]) -> dict[str, list[str]]:
    return _read_csv(_read_verified(path, key), path.name, columns)


def _lonlat(path: Path, key: str, x: np.ndarray, y: np.ndarray,
            main_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Read a *_lonlat.csv companion and check that its Xloc/Yloc keys match row by row."""
    cols = _read_table(path, key, _LONLAT_COLUMNS)
    kx = _floats(cols["Xloc"], path.name, "Xloc")
    ky = _floats(cols["Yloc"], path.name, "Yloc")
    if kx.shape != x.shape or not (np.array_equal(kx, x) and np.array_equal(ky, y)):
        raise ValueError(
            f"{path.name} does not match {main_name} row for row (Xloc/Yloc keys differ); "
            f"both must come from the same gstat table"
        )
    return (_floats(cols["long"], path.name, "long"), _floats(cols["lat"], path.name, "lat"))


def _flag_attrs(long_name: str, mapping: dict[int, str]) -> dict:
    return {
        "long_name": long_name,
        "flag_values": np.array(sorted(mapping), dtype=np.int8),
        "flag_meanings": " ".join(mapping[k] for k in sorted(mapping)),
    }


_X_ATTRS = {
    "units": "km", "axis": "X", "standard_name": "projection_x_coordinate",
    "long_name": "easting on the local Jura grid",
}
_Y_ATTRS = {
    "units": "km", "axis": "Y", "standard_name": "projection_y_coordinate",
    "long_name": "northing on the local Jura grid",
}
_LON_ATTRS = {"units": "degrees_east", "standard_name": "longitude",
              "long_name": "longitude (WGS84)"}
_LAT_ATTRS = {"units": "degrees_north", "standard_name": "latitude",
              "long_name": "latitude (WGS84)"}
_JURA_REFERENCES = (
    "Goovaerts, P. (1997). Geostatistics for Natural Resources Evaluation. Oxford "
    "University Press, New York (Appendix C)."
)
_JURA_LICENCE = (
    "distributed with the gstat R package (Pebesma 2004; data prepared by D. Rossiter and "
    "E. Pebesma) under GPL (>= 2); see datasets/README.md"
)


def load_jura(data_dir: str | Path | None = None) -> xr.Dataset:
    """Load the Jura topsoil heavy-metal data (Goovaerts 1997), all 359 sites.

    Reads ``jura_pred.csv``, ``jura_val.csv`` and their ``*_lonlat.csv`` companions from
    ``<data dir>/jura/`` (see :func:`data_home`), checking each file's sha256.

    Parameters
    ----------
    data_dir : str or Path, optional
        Data directory holding ``jura/``; default: see :func:`data_home`.

    Returns
    -------
    xarray.Dataset
        Dimension ``site`` (359): the 259 prediction sites of ``jura_pred.csv`` then the
        100 validation sites of ``jura_val.csv``, in file order.

        Coordinates (all along ``site``):

        * ``x``, ``y`` (float64, km): position on the local grid of the study area;
        * ``lon``, ``lat`` (float64, degrees_east / degrees_north, WGS84);
        * ``split`` (str): ``"prediction"`` or ``"validation"``.

        Data variables (along ``site``):

        * ``Cd``, ``Co``, ``Cr``, ``Cu``, ``Ni``, ``Pb``, ``Zn`` (float64, mg kg-1):
          concentrations in the topsoil; no missing values;
        * ``Landuse`` (int8 CF flags: 1 Forest, 2 Pasture, 3 Meadow, 4 Tillage);
        * ``Rock`` (int8 CF flags: 1 Argovian, 2 Kimmeridgian, 3 Sequanian,
          4 Portlandian, 5 Quaternary). :func:`decode_flags` gives the labels.

    Raises
    ------
    DataFileNotFoundError
        A file is missing; the message says where to put it and where to get it.
    ChecksumError
        A file differs from the reference copy.

    Examples
    --------
    >>> ds = load_jura()  # doctest: +SKIP
    >>> float(ds.Cd.where(ds.split == "prediction", drop=True).mean())  # doctest: +SKIP
    1.30908...
    """
    paths = _require("jura", data_dir, _JURA_FILES)
    parts = []
    for split, main, lonlat in (
        ("prediction", "jura_pred.csv", "jura_pred_lonlat.csv"),
        ("validation", "jura_val.csv", "jura_val_lonlat.csv"),
    ):
        cols = _read_table(paths[main], f"jura/{main}", _JURA_COLUMNS)
        x = _floats(cols["Xloc"], main, "Xloc")
        y = _floats(cols["Yloc"], main, "Yloc")
        lon, lat = _lonlat(paths[lonlat], f"jura/{lonlat}", x, y, main)
        part = {
            "x": x, "y": y, "lon": lon, "lat": lat,
            "split": np.full(x.shape, split),
            "Landuse": _codes(cols["Landuse"], JURA_LANDUSE, main, "Landuse"),
            "Rock": _codes(cols["Rock"], JURA_ROCK, main, "Rock"),
        }
        for metal in JURA_METALS:
            part[metal] = _floats(cols[metal], main, metal)
        parts.append(part)
    cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    data_vars = {
        m: ("site", cat[m], {"units": "mg kg-1",
                             "long_name": f"{name} concentration in topsoil"})
        for m, name in JURA_METALS.items()
    }
    data_vars["Landuse"] = ("site", cat["Landuse"], _flag_attrs("land use", JURA_LANDUSE))
    data_vars["Rock"] = ("site", cat["Rock"], _flag_attrs("rock type", JURA_ROCK))
    coords = {
        "x": ("site", cat["x"], _X_ATTRS),
        "y": ("site", cat["y"], _Y_ATTRS),
        "lon": ("site", cat["lon"], _LON_ATTRS),
        "lat": ("site", cat["lat"], _LAT_ATTRS),
        "split": ("site", cat["split"].astype(str), {
            "long_name": "subset of Goovaerts (1997)",
            "comment": "prediction: the 259 sites of jura.pred; validation: the 100 sites "
                       "of jura.val",
        }),
    }
    attrs = {
        "title": "Jura topsoil heavy-metal concentrations (Swiss Jura, Goovaerts 1997)",
        "source": "gstat R package data set jura (jura.pred, jura.val), read from "
                  "jura_pred.csv, jura_val.csv, jura_pred_lonlat.csv, jura_val_lonlat.csv",
        "references": _JURA_REFERENCES,
        "license": _JURA_LICENCE,
        "comment": "gstat notes that validation sites 22 and 100 do not lie exactly on the "
                   "intended grid; they are kept as in the book",
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def load_jura_grid(data_dir: str | Path | None = None) -> xr.Dataset:
    """Load the Jura prediction grid: 5,957 nodes inside the study area.

    The nodes lie on a regular 0.05 km grid (x 0.3-5.1 km, y 0.1-5.9 km); only those
    inside the study area are listed. Reads ``jura_grid.csv`` and ``jura_grid_lonlat.csv``
    from ``<data dir>/jura/``, checking each file's sha256.

    Parameters
    ----------
    data_dir : str or Path, optional
        Data directory holding ``jura/``; default: see :func:`data_home`.

    Returns
    -------
    xarray.Dataset
        Dimension ``node`` (5957), in file order. Coordinates ``x``, ``y`` (km, local grid)
        and ``lon``, ``lat`` (degrees, WGS84); data variables ``Landuse`` and ``Rock``
        (int8 CF flag variables with the codes of :func:`load_jura`).

    Raises
    ------
    DataFileNotFoundError
        A file is missing.
    ChecksumError
        A file differs from the reference copy.
    """
    paths = _require("jura", data_dir, _JURA_GRID_FILES)
    cols = _read_table(paths["jura_grid.csv"], "jura/jura_grid.csv", _JURA_GRID_COLUMNS)
    x = _floats(cols["Xloc"], "jura_grid.csv", "Xloc")
    y = _floats(cols["Yloc"], "jura_grid.csv", "Yloc")
    lon, lat = _lonlat(paths["jura_grid_lonlat.csv"], "jura/jura_grid_lonlat.csv", x, y,
                       "jura_grid.csv")
    return xr.Dataset(
        {
            "Landuse": ("node", _codes(cols["Landuse"], JURA_LANDUSE, "jura_grid.csv",
                                       "Landuse"), _flag_attrs("land use", JURA_LANDUSE)),
            "Rock": ("node", _codes(cols["Rock"], JURA_ROCK, "jura_grid.csv", "Rock"),
                     _flag_attrs("rock type", JURA_ROCK)),
        },
        coords={
            "x": ("node", x, _X_ATTRS),
            "y": ("node", y, _Y_ATTRS),
            "lon": ("node", lon, _LON_ATTRS),
            "lat": ("node", lat, _LAT_ATTRS),
        },
        attrs={
            "title": "Jura prediction grid (0.05 km spacing, nodes inside the study area)",
            "source": "gstat R package data set jura (jura.grid), read from jura_grid.csv "
                      "and jura_grid_lonlat.csv",
            "references": _JURA_REFERENCES,
            "license": _JURA_LICENCE,
        },
    )


def decode_flags(da: xr.DataArray) -> xr.DataArray:
    """Labels of a CF flag variable (``flag_values`` / ``flag_meanings``).

    Parameters
    ----------
    da : xarray.DataArray
        Integer codes with CF attributes ``flag_values`` and ``flag_meanings``, e.g.
        ``load_jura().Rock``.

    Returns
    -------
    xarray.DataArray
        Same shape and coordinates, dtype str; codes outside ``flag_values`` become ``""``.

    Raises
    ------
    ValueError
        The attributes are missing or do not pair up.
    """
    try:
        values = np.atleast_1d(np.asarray(da.attrs["flag_values"]))
        meanings = str(da.attrs["flag_meanings"]).split()
    except KeyError:
        raise ValueError(f"{da.name!r} has no flag_values/flag_meanings attributes") from None
    if len(values) != len(meanings):
        raise ValueError(
            f"{da.name!r}: {len(values)} flag_values but {len(meanings)} flag_meanings"
        )
    width = max(len(m) for m in meanings)
    out = np.full(da.shape, "", dtype=f"<U{width}")
    codes = np.asarray(da.values)
    for v, m in zip(values, meanings):
        out[codes == v] = m
    res = da.copy(data=out)
    res.attrs = {k: v for k, v in da.attrs.items() if k not in ("flag_values", "flag_meanings")}
    return res


# --------------------------------------------------------------------------------------
# SPE10
# --------------------------------------------------------------------------------------

_WS = re.compile(rb"\s")


def _parse_numbers(data: bytes, count: int, name: str, chunk: int = 1 << 22) -> np.ndarray:
    """Parse exactly ``count`` whitespace-separated numbers from ASCII text.

    The text is parsed in pieces of about ``chunk`` bytes (cut at whitespace), so the
    temporary token lists stay small.
    """
    out = np.empty(count, dtype=np.float64)
    n = pos = 0
    end_all = len(data)
    while pos < end_all:
        end = min(pos + chunk, end_all)
        if end < end_all:
            m = _WS.search(data, end)
            end = m.start() if m else end_all
        tokens = data[pos:end].split()
        k = len(tokens)
        if n + k > count:
            raise ValueError(f"{name}: more than the expected {count} values")
        if k:
            try:
                out[n : n + k] = np.array(tokens, dtype=np.float64)
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None
        n += k
        pos = end
    if n != count:
        raise ValueError(f"{name}: found {n} values, expected {count}")
    return out


def _parse_spe10_blocks(data: bytes, n_blocks: int, shape: tuple[int, int, int] = SPE10_SHAPE,
                        name: str = "SPE10 text") -> np.ndarray:
    """Parse SPE10 text (``n_blocks`` whole blocks, x fastest, then y, then z).

    Returns an array of shape ``(n_blocks, nz, ny, nx)``; block order as in the file
    (for ``spe_perm.dat``: kx, ky, kz).
    """
    return _parse_numbers(data, n_blocks * int(np.prod(shape)), name).reshape(n_blocks, *shape)


def _downsample(a: np.ndarray, k: int) -> np.ndarray:
    return a if k == 1 else np.ascontiguousarray(a[::k, ::k, ::k])


#: One millidarcy as a UDUNITS unit string (UDUNITS has no darcy): the ``units`` of the SPE10
#: permeabilities, whose ``long_name`` says "(mD)".
MILLIDARCY = "9.869233e-16 m2"

_SPE10_VAR_ATTRS = {
    "porosity": {"units": "1", "long_name": "porosity",
                 "comment": "pore volume fraction; 0 in inactive (non-reservoir) cells"},
    "kx": {"units": MILLIDARCY, "long_name": "permeability in the x direction (mD)"},
    "ky": {"units": MILLIDARCY, "long_name": "permeability in the y direction (mD)"},
    "kz": {"units": MILLIDARCY, "long_name": "permeability in the z (vertical) direction (mD)"},
}


def load_spe10(
    downsample: int = 1,
    data_dir: str | Path | None = None,
    *,
    variables: Sequence[str] | None = None,
    source: Literal["auto", "npz", "dat"] = "auto",
) -> xr.Dataset:
    """Load porosity and permeability of SPE10 model 2 (Christie & Blunt 2001).

    The model has 60 x 220 x 85 cells of 6.096 m (x) x 3.048 m (y) x 0.6096 m (z)
    (20 ft x 10 ft x 2 ft). Layers 1-35 (from the top) are the Tarbert formation, layers
    36-85 the Upper Ness. Values are float64, exactly as in the original files.

    Files are read from ``<data dir>/spe10/`` (see :func:`data_home`): ``spe10.npz``
    (arrays ``phi``, ``kx``, ``ky``, ``kz`` of shape (85, 220, 60)) when present, else the
    original text pair ``spe_phi.dat`` + ``spe_perm.dat`` of the SPE archive. Each file is
    checked against :data:`REGISTRY` (sha256; git blob SHA-1 for ``spe_perm.dat``).

    Parameters
    ----------
    downsample : int, default 1
        Keep every k-th cell along each axis (``a[::k, ::k, ::k]``): 1 gives
        (85, 220, 60), 2 gives (43, 110, 30).
    data_dir : str or Path, optional
        Data directory holding ``spe10/``; default: see :func:`data_home`.
    variables : sequence of str, optional
        Subset of ``("porosity", "kx", "ky", "kz")`` to load (default all). With
        ``porosity`` alone, the text source needs only ``spe_phi.dat``.
    source : {"auto", "npz", "dat"}
        Which files to read; ``"auto"`` prefers ``spe10.npz``.

    Returns
    -------
    xarray.Dataset
        Dimensions ``(z, y, x)``. Coordinates:

        * ``x``, ``y`` (m): cell centres, ``(i + 0.5) * dx`` for the kept cells;
        * ``z`` (m, ``positive: "down"``): depth of the cell centre below the top of the
          model; layer 1 (top) first;
        * ``layer`` (along z, int): 1-based layer number;
        * ``formation`` (along z, str): ``"Tarbert"`` or ``"Upper Ness"``.

        Data variables (float64, shape (nz, ny, nx)): ``porosity`` (fraction, units "1";
        27,579 cells at full resolution are 0) and ``kx``, ``ky``, ``kz`` (mD).

    Raises
    ------
    DataFileNotFoundError
        No usable file set is present.
    ChecksumError
        A file differs from the reference copy.
    ValueError
        Bad ``downsample``, ``variables`` or ``source``.
    """
    try:
        k = operator.index(downsample)
    except TypeError:
        raise TypeError(f"downsample must be an integer, got {downsample!r}") from None
    if isinstance(downsample, bool) or k < 1:
        raise ValueError(f"downsample must be a positive integer, got {downsample!r}")
    if variables is None:
        wanted = list(_SPE10_VARIABLES)
    else:
        wanted = [variables] if isinstance(variables, str) else list(variables)
        bad = [v for v in wanted if v not in _SPE10_VARIABLES]
        if bad or not wanted or len(set(wanted)) != len(wanted):
            raise ValueError(
                f"variables must be distinct names from {list(_SPE10_VARIABLES)}, got {wanted}"
            )
    if source not in ("auto", "npz", "dat"):
        raise ValueError(f"source must be 'auto', 'npz' or 'dat', got {source!r}")

    root, how = _resolve_root("spe10", data_dir)
    folder = root / "spe10"
    dat_needed = (["spe_phi.dat"] if "porosity" in wanted else []) + (
        ["spe_perm.dat"] if set(wanted) - {"porosity"} else []
    )
    npz_path = folder / _SPE10_NPZ
    if source == "npz" or (source == "auto" and npz_path.is_file()):
        if not npz_path.is_file():
            raise _not_found("spe10", folder, how, [_SPE10_NPZ])
        arrays = _read_spe10_npz(npz_path, wanted, k)
        files = [_SPE10_NPZ]
    else:
        missing = [n for n in dat_needed if not (folder / n).is_file()]
        if missing:
            if source == "auto":
                missing = [_SPE10_NPZ + " (or " + " + ".join(missing) + ")"]
            raise _not_found("spe10", folder, how, missing)
        arrays = _read_spe10_dat(folder, wanted, k)
        files = dat_needed
    return _spe10_dataset(arrays, k, files)


def _read_spe10_npz(path: Path, wanted: Sequence[str], k: int) -> dict[str, np.ndarray]:
    _check(path, REGISTRY[f"spe10/{_SPE10_NPZ}"])
    names = {"porosity": "phi", "kx": "kx", "ky": "ky", "kz": "kz"}
    out = {}
    with np.load(path, allow_pickle=False) as npz:
        for var in wanted:
            a = npz[names[var]]
            if a.shape != SPE10_SHAPE or a.dtype != np.float64:
                raise ValueError(f"{path}: array {names[var]} is {a.dtype} {a.shape}, "
                                 f"expected float64 {SPE10_SHAPE}")
            out[var] = _downsample(a, k)
            del a
    return out


def _read_spe10_dat(folder: Path, wanted: Sequence[str], k: int) -> dict[str, np.ndarray]:
    out = {}
    if "porosity" in wanted:
        data = _read_verified(folder / "spe_phi.dat", "spe10/spe_phi.dat")
        out["porosity"] = _downsample(_parse_spe10_blocks(data, 1, name="spe_phi.dat")[0], k)
        del data
    perm_vars = [v for v in wanted if v != "porosity"]
    if perm_vars:
        data = _read_verified(folder / "spe_perm.dat", "spe10/spe_perm.dat")
        blocks = _parse_spe10_blocks(data, 3, name="spe_perm.dat")
        del data
        keep_views = k == 1 and len(perm_vars) == 3  # views share the one parsed array
        for i, var in enumerate(("kx", "ky", "kz")):
            if var in perm_vars:
                out[var] = blocks[i] if keep_views else np.ascontiguousarray(
                    blocks[i, ::k, ::k, ::k])
        del blocks
    return {v: out[v] for v in wanted}


def _spe10_dataset(arrays: dict[str, np.ndarray], k: int, files: Sequence[str]) -> xr.Dataset:
    nz, ny, nx = SPE10_SHAPE
    iz, iy, ix = (np.arange(0, n, k) for n in (nz, ny, nx))
    layer = iz + 1
    formation = np.where(layer <= _SPE10_TARBERT_LAYERS, "Tarbert", "Upper Ness")
    coords = {
        "z": ("z", (iz + 0.5) * SPE10_CELL_SIZE["z"], {
            "units": "m", "axis": "Z", "positive": "down",
            "long_name": "depth of the cell centre below the top of the model"}),
        "y": ("y", (iy + 0.5) * SPE10_CELL_SIZE["y"], {
            "units": "m", "axis": "Y", "standard_name": "projection_y_coordinate",
            "long_name": "y coordinate of the cell centre"}),
        "x": ("x", (ix + 0.5) * SPE10_CELL_SIZE["x"], {
            "units": "m", "axis": "X", "standard_name": "projection_x_coordinate",
            "long_name": "x coordinate of the cell centre"}),
        "layer": ("z", layer.astype(np.int32), {
            "long_name": "layer number, 1 at the top", "units": "1"}),
        "formation": ("z", formation.astype(str), {
            "long_name": "geological formation",
            "comment": "layers 1-35 Tarbert, 36-85 Upper Ness"}),
    }
    data_vars = {v: (("z", "y", "x"), a, _SPE10_VAR_ATTRS[v]) for v, a in arrays.items()}
    attrs = {
        "title": "SPE10 model 2: porosity and permeability (Tenth SPE Comparative Solution "
                 "Project)",
        "source": "SPE Comparative Solution Project archive por_perm_case2a.zip; read from "
                  + ", ".join(files),
        "references": "Christie, M. A. and Blunt, M. J. (2001). Tenth SPE Comparative "
                      "Solution Project: a comparison of upscaling techniques. SPE Reservoir "
                      "Evaluation & Engineering 4(4), 308-317. doi:10.2118/72469-PA",
        "formations": "Tarbert: layers 1-35 (top, shallow-marine, smooth); Upper Ness: "
                      "layers 36-85 (fluvial, channelised)",
        "cell_size_m": "dx = 6.096 m (20 ft), dy = 3.048 m (10 ft), dz = 0.6096 m (2 ft)",
        "downsample": np.int32(k),
        "license": "published by the Society of Petroleum Engineers for the comparative "
                   "solution project; see the SPE terms",
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


# --------------------------------------------------------------------------------------
# Synthetic fields
# --------------------------------------------------------------------------------------

_DEFAULT_GRID_DIMS = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x"), 4: ("t", "z", "y", "x")}
_AXIS = {"x": "X", "y": "Y", "z": "Z"}
_STANDARD = {
    "x": {"standard_name": "projection_x_coordinate"},
    "y": {"standard_name": "projection_y_coordinate"},
    "z": {"standard_name": "depth", "positive": "down"},
}


def _per_dim(value: float | Sequence[float], ndim: int, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        arr = np.full(ndim, float(arr))
    if arr.shape != (ndim,):
        raise ValueError(f"{what} must be a number or a sequence of {ndim}, got {value!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{what} must be positive and finite, got {value!r}")
    return arr


def make_gaussian_field(
    shape: Sequence[int] | None = None,
    *,
    n_points: int | None = None,
    dims: Sequence[str] | None = None,
    n_vars: int = 3,
    n_latent: int = 2,
    lengthscale: float | Sequence[float] = 0.2,
    kernel: str = "rbf",
    noise: float = 0.05,
    missing: float = 0.5,
    fully_missing: float = 0.0,
    nonlinear: float = 0.3,
    extent: float | Sequence[float] = 1.0,
    names: Sequence[str] | None = None,
    units: str = "km",
    seed: int | np.random.Generator | None = 0,
    return_truth: bool = False,
) -> xr.Dataset | tuple[xr.Dataset, xr.Dataset]:
    """A synthetic multi-variable Gaussian-process field with holes.

    ``n_latent`` stationary GPs are mixed into ``n_vars`` correlated variables, noise is
    added and values are dropped at random (see :func:`geogpvae.synthetic.make_field`).

    Parameters
    ----------
    shape : sequence of int, optional
        Grid shape, 1 to 4 axes, e.g. ``(64, 64)`` or ``(43, 110, 30)``. Default
        ``(64, 64)`` unless ``n_points`` is given; give one of the two.
    n_points : int, optional
        Draw the field at this many scattered points, uniform in the domain, on
        dimension ``site``.
    dims : sequence of str, optional
        Grid: dimension names, in array order; default ``("x",)``, ``("y", "x")``,
        ``("z", "y", "x")`` or ``("t", "z", "y", "x")``. Scattered points: names of the
        coordinate variables, one per spatial dimension; default ``("x", "y")``.
    n_vars, n_latent : int
        Number of variables and of latent GPs.
    lengthscale : float or sequence of float
        GP lengthscale as a fraction of the domain extent along each axis (one value, or
        one per entry of ``dims``).
    kernel : {"rbf", "matern12", "matern32", "matern52"}
        Covariance family of the latent GPs.
    noise : float
        Standard deviation of independent noise on every value (variables have roughly
        unit variance).
    missing : float in [0, 1)
        Probability that each value is dropped.
    fully_missing : float in [0, 1)
        Extra fraction of locations where every variable is dropped.
    nonlinear : float
        Weight of a smooth nonlinear interaction term between the first two latent GPs.
    extent : float or sequence of float
        Domain size along each axis, in coordinate units; coordinates run from 0 to
        ``extent`` (grid: ``linspace(0, extent, n)``).
    names : sequence of str, optional
        Variable names; default ``v0, v1, ...``.
    units : str
        Units of the coordinates (CF ``units``), default ``"km"``. x and y are marked as
        projection coordinates and z as depth (positive down), so written files are CF-clean.
    seed : int, numpy Generator or None
        Random seed; the same seed gives the same field and holes.
    return_truth : bool
        Also return the field without holes.

    Returns
    -------
    xarray.Dataset or (xarray.Dataset, xarray.Dataset)
        Variables (float64, NaN at the holes) on the grid dims, or on ``site`` with
        coordinates ``x``, ``y``, ... along it. With ``return_truth``, a pair
        ``(field, truth)`` where ``truth`` has the same variables without holes.

    Examples
    --------
    >>> ds = make_gaussian_field((32, 48), missing=0.3, seed=1)
    >>> dict(ds.sizes), list(ds.data_vars)
    ({'y': 32, 'x': 48}, ['v0', 'v1', 'v2'])
    >>> pts = make_gaussian_field(n_points=500, dims=("x", "y", "z"))
    >>> dict(pts.sizes), sorted(pts.coords)
    ({'site': 500}, ['x', 'y', 'z'])
    """
    if shape is not None and n_points is not None:
        raise ValueError("give either shape (a grid) or n_points (scattered points), not both")
    for label, val in (("n_vars", n_vars), ("n_latent", n_latent)):
        if operator.index(val) < 1:
            raise ValueError(f"{label} must be >= 1, got {val}")
    if not 0.0 <= fully_missing < 1.0:
        raise ValueError(f"fully_missing must be in [0, 1), got {fully_missing}")
    if names is None:
        names = [f"v{i}" for i in range(n_vars)]
    names = list(names)
    if len(names) != n_vars or len(set(names)) != n_vars:
        raise ValueError(f"names must be {n_vars} distinct strings, got {names}")

    if n_points is not None:
        n = operator.index(n_points)
        if n < 1:
            raise ValueError(f"n_points must be >= 1, got {n_points}")
        dims = tuple(dims) if dims is not None else ("x", "y")
        grid_shape = None
    else:
        grid_shape = tuple(operator.index(s) for s in (shape if shape is not None else (64, 64)))
        if not 1 <= len(grid_shape) <= 4 or min(grid_shape) < 1:
            raise ValueError(f"shape must have 1 to 4 positive sizes, got {shape}")
        dims = tuple(dims) if dims is not None else _DEFAULT_GRID_DIMS[len(grid_shape)]
        if len(dims) != len(grid_shape):
            raise ValueError(f"dims {dims} do not match shape {grid_shape}")
    ndim = len(dims)
    if ndim == 0 or len(set(dims)) != ndim:
        raise ValueError(f"dims must be distinct names, got {dims}")
    clash = set(dims) & (set(names) | {"site"})
    if clash:
        raise ValueError(f"dimension/coordinate names {sorted(clash)} clash with variables")
    ext = _per_dim(extent, ndim, "extent")
    ls = _per_dim(lengthscale, ndim, "lengthscale") * ext

    rng = np.random.default_rng(seed)
    if grid_shape is not None:
        spacing = [e / (s - 1) if s > 1 else 0.0 for e, s in zip(ext, grid_shape)]
        points = grid_points(grid_shape, spacing)
    else:
        points = rng.uniform(0.0, 1.0, size=(n, ndim)) * ext
    field = make_field(
        points, n_vars=n_vars, n_latent=n_latent, lengthscale=ls, kernel=kernel, noise=noise,
        missing=missing, nonlinear=nonlinear, fully_missing=fully_missing, rng=rng,
    )

    def coord_attrs(d: str) -> dict:
        attrs = {"units": units, "long_name": f"{d} coordinate"}
        if d in _AXIS:
            attrs["axis"] = _AXIS[d]
            # CF: spatial axes carry a standard name, so checkers do not take x/y for lon/lat
            attrs.update(_STANDARD[d])
        return attrs

    if grid_shape is not None:
        var_dims: tuple[str, ...] = dims
        coords = {
            d: (d, np.linspace(0.0, e, s) if s > 1 else np.zeros(1), coord_attrs(d))
            for d, e, s in zip(dims, ext, grid_shape)
        }
        to_shape = grid_shape
    else:
        var_dims = ("site",)
        coords = {d: ("site", points[:, j], coord_attrs(d)) for j, d in enumerate(dims)}
        to_shape = (n,)

    attrs = {
        "title": "synthetic Gaussian-process field with holes",
        "source": "geogpvae.datasets.make_gaussian_field",
        "kernel": kernel,
        "lengthscale": ls,
        "n_latent": np.int32(n_latent),
        "noise": float(noise),
        "missing": float(missing),
        "fully_missing": float(fully_missing),
        "nonlinear": float(nonlinear),
    }
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        attrs["seed"] = int(seed)

    def build(values: np.ndarray, title_suffix: str) -> xr.Dataset:
        data_vars = {
            name: (var_dims, values[:, j].reshape(to_shape),
                   {"long_name": f"synthetic variable {name}", "units": "1"})
            for j, name in enumerate(names)
        }
        return xr.Dataset(data_vars, coords=coords,
                          attrs={**attrs, "title": attrs["title"] + title_suffix})

    ds = build(field.values, "")
    if return_truth:
        return ds, build(field.truth, " (truth, no holes)")
    return ds
