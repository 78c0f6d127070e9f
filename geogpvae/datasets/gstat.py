"""Five more real surveys shipped with the gstat R package, as xarray Datasets for tuning and examples.

The CSV files are the package's ``.rda`` tables written out unchanged (``datasets/README.md``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import xarray as xr

from .registry import _read_verified, _require

__all__ = ["GSTAT_SURVEYS", "load_gstat"]

#: The surveys :func:`load_gstat` reads, name -> what it holds.
GSTAT_SURVEYS: dict[str, str] = {
    "oxford": "topsoil chemistry at 126 profiles near Oxford on a 100 m grid (Burrough)",
    "coalash": "coal ash in a coal seam at 208 grid nodes with holes (Cressie)",
    "fulmar": "fulmar density from aerial surveys of the Dutch North Sea, 1998 and 1999",
    "pcb": "PCB138 in sediments of the Dutch North Sea at 216 sites, several years",
    "tull": "chloride in groundwater at 36 Tullnerfeld wells on 161 dates, 1992-2001",
}
_FILES = {
    "oxford": ("oxford.csv",),
    "coalash": ("coalash.csv",),
    "fulmar": ("fulmar.csv",),
    "pcb": ("pcb.csv",),
    "tull": ("tull_Chlorid92.csv", "tull_tull36.csv"),
}
_OXFORD_CHEMISTRY = {
    "MG1": "exchangeable magnesium, topsoil", "OM1": "organic matter, topsoil",
    "CEC1": "cation exchange capacity, topsoil", "PH1": "pH, topsoil",
    "PHOS1": "extractable phosphorus, topsoil", "POT1": "exchangeable potassium, topsoil",
}
_LICENCE = "distributed with the gstat R package (Pebesma 2004) under GPL (>= 2); see datasets/README.md"


def _table(path: Path, key: str) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(_read_verified(path, key).decode("utf-8"))))
    header, body = rows[0], rows[1:]
    for i, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path.name}, line {i}: expected {len(header)} fields, found {len(row)}")
    return header, body


def _column(header: list[str], body: list[list[str]], name: str, path: Path) -> np.ndarray:
    """One numeric column; empty fields and ``NA`` are NaN."""
    if name not in header:
        raise ValueError(f"{path.name}: no column {name!r}; found {','.join(header)}")
    j = header.index(name)
    try:
        return np.array([float(r[j]) if r[j] not in ("", "NA") else np.nan for r in body])
    except ValueError as err:
        raise ValueError(f"{path.name}, column {name}: {err}") from None


def _xy(x: np.ndarray, y: np.ndarray, dim: str, units: str | None) -> dict:
    extra = {} if units is None else {"units": units}
    return {"x": (dim, x, {"axis": "X", "long_name": "easting", **extra}),
            "y": (dim, y, {"axis": "Y", "long_name": "northing", **extra})}


def load_gstat(name: str, data_dir: str | Path | None = None) -> xr.Dataset:
    """Load one of the gstat surveys (:data:`GSTAT_SURVEYS`), checking each file's sha256.

    Parameters
    ----------
    name : {"oxford", "coalash", "fulmar", "pcb", "tull"}
        The survey.
    data_dir : str or Path, optional
        Data directory holding ``gstat/``; default: see :func:`data_home`.

    Returns
    -------
    xarray.Dataset
        Scattered surveys on dim ``site`` with coordinates ``x``, ``y``:

        * ``oxford``: 126 profiles, x, y in m; ``MG1``, ``OM1``, ``CEC1``, ``PH1``, ``PHOS1``,
          ``POT1`` (topsoil chemistry), ``ELEV`` (m) and ``PCLAY1`` (% clay);
        * ``coalash``: 208 nodes, x, y in grid units; ``coalash`` (%);
        * ``fulmar``: 1,324 transect points, x, y in m (UTM 31), coordinate ``year``; ``fulmar``
          (birds km-2), ``depth`` (m), ``coast`` (distance to the coast);
        * ``pcb``: 216 sites, x, y in m (UTM 31), coordinate ``year``; ``PCB138`` (ug kg-1),
          ``depth`` (m), ``coast``.

        ``tull`` is a station network on dims ``(time, station)``: ``chloride`` (mg l-1, NaN where
        not sampled; 161 dates x 36 wells), coordinates ``time`` (datetime64), ``station`` (well
        names) and ``x``, ``y`` on ``station`` (the package's scaled units).

    Raises
    ------
    ValueError
        An unknown survey.
    DataFileNotFoundError, ChecksumError
        A file is missing or differs from the reference copy.

    Examples
    --------
    >>> from geogpvae.datasets import load_gstat
    >>> ds = load_gstat("coalash")  # doctest: +SKIP
    >>> ds.coalash.sizes  # doctest: +SKIP
    Frozen({'site': 208})
    """
    if name not in _FILES:
        raise ValueError(f"unknown gstat survey {name!r}; choose one of {list(_FILES)}")
    paths = _require("gstat", data_dir, _FILES[name])
    first = paths[_FILES[name][0]]
    header, body = _table(first, f"gstat/{first.name}")

    def col(c: str) -> np.ndarray:
        return _column(header, body, c, first)

    attrs = {"title": GSTAT_SURVEYS[name], "source": f"gstat R package data set {name}, read from "
             + ", ".join(_FILES[name]), "license": _LICENCE}
    if name == "tull":
        wells = header[1:]
        seconds = col("Datum")
        values = np.column_stack([col(w) for w in wells])
        loc_path = paths["tull_tull36.csv"]
        loc_header, loc_body = _table(loc_path, "gstat/tull_tull36.csv")
        sx, sy = (_column(loc_header, loc_body, c, loc_path) for c in ("x", "y"))
        if sx.size != len(wells):
            raise ValueError(f"{loc_path.name} has {sx.size} wells, {first.name} {len(wells)}")
        time = np.datetime64("1970-01-01T00:00:00", "s") + seconds.astype("int64").astype("timedelta64[s]")
        return xr.Dataset(
            {"chloride": (("time", "station"), values, {"units": "mg l-1", "long_name": "chloride in groundwater"})},
            coords={"time": ("time", time), "station": ("station", np.array(wells)), **_xy(sx, sy, "station", None)},
            attrs=attrs)
    if name == "oxford":
        data = {v: ("site", col(v), {"long_name": long}) for v, long in _OXFORD_CHEMISTRY.items()}
        data["ELEV"] = ("site", col("ELEV"), {"units": "m", "long_name": "elevation"})
        data["PCLAY1"] = ("site", col("PCLAY1"), {"units": "%", "long_name": "clay, topsoil"})
        return xr.Dataset(data, coords=_xy(col("XCOORD"), col("YCOORD"), "site", "m"), attrs=attrs)
    if name == "coalash":
        data = {"coalash": ("site", col("coalash"), {"units": "%", "long_name": "coal ash"})}
        return xr.Dataset(data, coords=_xy(col("x"), col("y"), "site", None), attrs=attrs)
    target = {"fulmar": ("fulmar", "km-2", "fulmar density"), "pcb": ("PCB138", "ug kg-1", "PCB138 in sediment")}[name]
    data = {target[0]: ("site", col(target[0]), {"units": target[1], "long_name": target[2]}),
            "depth": ("site", col("depth"), {"units": "m", "long_name": "water depth"}),
            "coast": ("site", col("coast"), {"long_name": "distance to the coast"})}
    coords = {**_xy(col("x"), col("y"), "site", "m"), "year": ("site", col("year").astype(int))}
    return xr.Dataset(data, coords=coords, attrs=attrs)
