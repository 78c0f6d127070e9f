"""The data files geogpvae knows (checksums, where they are published), the data directory that
holds them and the checks every loader runs before reading a byte."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DataFile", "REGISTRY", "DataFileNotFoundError", "ChecksumError", "data_home", "available", "verify_file"]


@dataclass(frozen=True)
class DataFile:
    """One known data file and how to check it.

    Attributes
    ----------
    dataset, name : str
        Data set and sub-folder of the data directory (``"jura"``, ``"spe10"`` or ``"gstat"``), and file name in it.
    size : int or None
        Size in bytes, None where not known.
    sha256 : str or None
        Lower-case hex sha256 of the whole file, None where not known.
    git_blob_sha1 : str or None
        Git blob id, ``sha1(b"blob <size>\\0" + content)``, checked when ``sha256`` is None.
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


#: Every known data file by ``"<dataset>/<file name>"``, with the checksums of the copies datasets/README.md describes.
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
    DataFile(
        "gstat", "oxford.csv", 13037,
        "92873a06d6cf578f06135e74000eb437d90f9a30f6a0eb13ae9bcea2db8b343f", None,
        "gstat oxford: 126 soil profiles near Oxford, 22 columns (XCOORD, YCOORD in m, topsoil chemistry)",
    ),
    DataFile(
        "gstat", "coalash.csv", 2150,
        "41beab2fbaf7c6c9d9e80d794e4ee34f4571bd177370af74ca084a2b13755c3f", None,
        "gstat coalash: x, y (grid units), coalash (%) at 208 nodes",
    ),
    DataFile(
        "gstat", "fulmar.csv", 59245,
        "3ce02d1114eaef77d5ef6da69aa74930c3fa029ab7b61fbe31db1291f95a2b0d", None,
        "gstat fulmar: year, x, y (UTM31, m), depth, coast, fulmar (birds per km2) at 1,324 points",
    ),
    DataFile(
        "gstat", "pcb.csv", 12587,
        "021ea9cc04b0d399e90686acb051d3fa470738c2d7f47b4a1c7448eec86b2834", None,
        "gstat pcb: year, x, y (UTM31, m), coast, depth, PCB138, yf at 216 sites",
    ),
    DataFile(
        "gstat", "tull_Chlorid92.csv", 10855,
        "932b2e49f703b4e566ec1779930d52c64cf078a0b13713904b61a9472ecefe53", None,
        "gstat Chlorid92: Datum (s since 1970) and chloride (mg/l) at 36 wells, 161 dates",
    ),
    DataFile(
        "gstat", "tull_tull36.csv", 812,
        "773ef019c66570a5a06c635625bd4cfc095e2b42ce47126cb7acd72e6f1b3574", None,
        "gstat tull36: x, y of the 36 wells, in Chlorid92's column order",
    ),
    DataFile(
        "gstat", "tull_TULLNREG.csv", 6097,
        "bacfb9d640422d11d79edcc2a6b709f66fed607ccd7372d49d0b83b76a272723", None,
        "gstat TULLNREG: outline points of the Tullnerfeld region; not read by geogpvae",
    ),
)

_JURA_FILES = (
    "jura_pred.csv", "jura_val.csv", "jura_pred_lonlat.csv", "jura_val_lonlat.csv",
)
_JURA_GRID_FILES = ("jura_grid.csv", "jura_grid_lonlat.csv")
_SPE10_NPZ = "spe10.npz"
_SPE10_DAT = ("spe_phi.dat", "spe_perm.dat")
_GSTAT_FILES = ("oxford.csv", "coalash.csv", "fulmar.csv", "pcb.csv", "tull_Chlorid92.csv", "tull_tull36.csv")
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
    "gstat": (
        "The gstat surveys are published with the gstat R package (CRAN, "
        "https://cran.r-project.org/package=gstat, data/*.rda): in R, `library(gstat); "
        "data(oxford)` and likewise coalash, fulmar, pcb, tull; write each table with "
        "write.csv(..., row.names = FALSE) as datasets/README.md of the geogpvae source tree shows."
    ),
}



class DataFileNotFoundError(FileNotFoundError):
    """A data file is not in the data directory (``path``: the missing file or folder); the message
    says where files are looked for, where to put them and where they are published."""

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



_ENV_VAR = "GEOGPVAE_DATA_DIR"
#: ``datasets/`` at the top of a source checkout (unused when it holds no data files).
_REPO_DATA_DIR = Path(__file__).resolve().parents[2] / "datasets"
_DATASETS = ("jura", "spe10", "gstat")


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
    """Folder in which the loaders look for data files (nothing is created).

    The data directory is the first of: ``data_dir``; ``$GEOGPVAE_DATA_DIR``; the ``datasets/``
    folder of a source checkout when it holds files of the data set (of any, when ``dataset`` is
    None); the cache folder ``$XDG_CACHE_HOME/geogpvae`` (default ``~/.cache/geogpvae``).

    Parameters
    ----------
    dataset : {"jura", "spe10", "gstat"} or None
        That data set's sub-folder (where its files go); None: the data directory itself.
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
    if folder.parent.is_file():
        what = f"the data directory {folder.parent} is a file, not a folder"
    elif not folder.is_dir():
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
    """Which real data sets are found, and where (files present; the loaders check the checksums).

    Parameters
    ----------
    data_dir : str or Path, optional
        Explicit data directory (see :func:`data_home`).

    Returns
    -------
    dict
        ``"jura"``, ``"jura_grid"``, ``"spe10"`` (``spe10.npz`` or both ``.dat`` files) and ``"gstat"``
        (the five surveys of :func:`load_gstat`) -> the folder holding it, or None.
    """
    out: dict[str, Path | None] = {}
    wants = {
        "jura": ("jura", [_JURA_FILES]),
        "jura_grid": ("jura", [_JURA_GRID_FILES]),
        "spe10": ("spe10", [(_SPE10_NPZ,), _SPE10_DAT]),
        "gstat": ("gstat", [_GSTAT_FILES]),
    }
    for label, (dataset, alternatives) in wants.items():
        folder = data_home(dataset, data_dir)
        ok = any(all((folder / n).is_file() for n in names) for names in alternatives)
        out[label] = folder if ok else None
    return out



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
    """Check a data file against :data:`REGISTRY`: its sha256, else its git blob SHA-1 (cached per process).

    Parameters
    ----------
    path : str or Path
        The file.
    key : str, optional
        Registry key ``"<dataset>/<file name>"``; default: the file's folder and name.

    Returns
    -------
    pathlib.Path
        ``path``, once checked.

    Raises
    ------
    KeyError, FileNotFoundError
        The file is not registered, or does not exist.
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


