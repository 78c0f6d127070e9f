"""The Jura heavy-metal data (Goovaerts 1997): 359 topsoil samples and the prediction grid."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from .registry import _JURA_FILES, _JURA_GRID_FILES, _read_verified, _require

__all__ = ["JURA_LANDUSE", "JURA_ROCK", "JURA_METALS", "decode_flags", "load_jura", "load_jura_grid"]


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
    ``<data dir>/jura/``, checking each file's sha256.

    Parameters
    ----------
    data_dir : str or Path, optional
        Data directory holding ``jura/``; default: see :func:`data_home`.

    Returns
    -------
    xarray.Dataset
        On dim ``site``, the 259 prediction then the 100 validation sites in file order, with
        coordinates ``x``, ``y`` (km, local grid), ``lon``, ``lat`` (degrees, WGS84) and ``split``
        (``"prediction"`` or ``"validation"``); ``Cd``, ``Co``, ``Cr``, ``Cu``, ``Ni``, ``Pb``, ``Zn``
        (float64, mg kg-1, none missing); ``Landuse`` (:data:`JURA_LANDUSE`) and ``Rock``
        (:data:`JURA_ROCK`), int8 CF flag variables (:func:`decode_flags` gives the labels).

    Raises
    ------
    DataFileNotFoundError, ChecksumError
        A file is missing (the message says where to get it) or differs from the reference copy.

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
    """Load the Jura prediction grid: 5,957 nodes inside the study area (0.05 km grid, x 0.3-5.1, y 0.1-5.9 km).

    Reads ``jura_grid.csv`` and ``jura_grid_lonlat.csv`` from ``<data dir>/jura/``, checking their sha256.

    Parameters
    ----------
    data_dir : str or Path, optional
        Data directory holding ``jura/``; default: see :func:`data_home`.

    Returns
    -------
    xarray.Dataset
        On dim ``node`` in file order: ``x``, ``y`` (km, local grid), ``lon``, ``lat`` (degrees,
        WGS84) and the ``Landuse`` and ``Rock`` flag variables of :func:`load_jura`.

    Raises
    ------
    DataFileNotFoundError, ChecksumError
        A file is missing or differs from the reference copy.
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
        Integer codes with CF attributes ``flag_values`` and ``flag_meanings``, e.g. ``load_jura().Rock``.

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


