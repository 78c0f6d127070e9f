"""CF attributes of a whole output Dataset: provenance, point geometry, coordinate labels.

:func:`add_provenance` records a geogpvae run in ``history`` and ``geogpvae_*`` attributes;
:func:`point_geometry` marks scattered data as a CF point collection; :func:`label_lon_lat`
and :func:`label_units` give coordinates the ``standard_name`` and ``units`` they were taken
with. The variables of each imputed variable are :mod:`~geogpvae.fields.cf`'s job.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from numbers import Integral, Real
from typing import Any

import numpy as np
import xarray as xr

from .._version import __version__

__all__ = [
    "add_provenance",
    "attr_value",
    "label_lon_lat",
    "label_units",
    "point_geometry",
]

_ATTR_NAME = re.compile(r"[^0-9A-Za-z_]")


def attr_value(value: Any) -> Any:
    """Convert a Python value into something a netCDF attribute can hold.

    Booleans become ints (``True`` -> 1), numpy scalars Python scalars, ``str``/``int``/
    ``float`` pass through, and anything else (``None``, lists, dicts, arrays, paths, ...)
    is JSON-encoded into a string (``None`` -> ``"null"``; objects JSON cannot encode are
    written with ``str``).

    Parameters
    ----------
    value : object
        The value to store.

    Returns
    -------
    str or int or float
    """
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.generic):
        value = value.item()
        if isinstance(value, bool):
            return int(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    if isinstance(value, np.ndarray):
        value = value.tolist()

    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        if isinstance(obj, np.generic):
            return obj.item()
        return str(obj)

    return json.dumps(value, default=default, sort_keys=True)


def _attr_name(key: str) -> str:
    key = _ATTR_NAME.sub("_", str(key))
    return key if key.startswith("geogpvae_") else f"geogpvae_{key}"


def add_provenance(ds: xr.Dataset, call: str, options: Mapping[str, Any] | None = None, *,
                   now: datetime | None = None) -> xr.Dataset:
    """Record a geogpvae run in the global attributes.

    A line ``"<UTC time, ISO 8601>: geogpvae <version>: <call>"`` is prepended to the global
    ``history`` (older lines kept after it, newest first as is customary), and
    ``geogpvae_version`` plus one ``geogpvae_<key>`` attribute per option is set (e.g.
    ``geogpvae_engine``, ``geogpvae_neighbours``, ``geogpvae_kernel``, ``geogpvae_epochs``,
    ``geogpvae_seed``). Values are converted with :func:`attr_value`: booleans to ints,
    ``None`` and non-scalars to JSON strings. Global ``geogpvae_*`` attributes left by an
    earlier run are removed first, so they always describe the latest run; earlier runs
    remain in ``history``.

    Parameters
    ----------
    ds : xarray.Dataset
        The Dataset; not modified.
    call : str
        How the run was invoked, e.g. ``"impute(ds, vars=['Cd'], epochs=200)"``. Newlines
        are replaced by spaces to keep one history line per run.
    options : mapping of str to object, optional
        The run's options. Keys are used with a ``geogpvae_`` prefix (added if missing);
        characters other than letters, digits and ``_`` become ``_``.
    now : datetime, optional
        Time stamp to use (default: the current UTC time); a naive datetime is taken as UTC.

    Returns
    -------
    xarray.Dataset
        A shallow copy of ``ds`` (data shared) with new global attributes.
    """
    now = datetime.now(timezone.utc) if now is None else now
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    stamp = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    call_line = " ".join(str(call).split())
    line = f"{stamp}: geogpvae {__version__}: {call_line}"

    attrs = {k: v for k, v in ds.attrs.items() if not str(k).startswith("geogpvae_")}
    old = attrs.get("history")
    if isinstance(old, (list, tuple, np.ndarray)):
        old = "\n".join(str(x) for x in np.ravel(old))
    old = "" if old is None or (isinstance(old, float) and math.isnan(old)) else str(old)
    attrs["history"] = f"{line}\n{old}" if old.strip() else line

    attrs["geogpvae_version"] = __version__
    for key, value in (options or {}).items():
        attr = _attr_name(key)
        if attr == "geogpvae_version":
            continue
        attrs[attr] = attr_value(value)

    out = ds.copy(deep=False)
    out.attrs = attrs
    return out


# standard names that identify a spatiotemporal coordinate without an ``axis`` attribute
_POSITION_NAMES = frozenset({
    "longitude", "latitude", "grid_longitude", "grid_latitude", "projection_x_coordinate",
    "projection_y_coordinate", "depth", "height", "altitude", "time",
})


def point_geometry(ds: xr.Dataset) -> xr.Dataset:
    """Mark scattered data as a CF discrete sampling geometry of ``featureType`` "point".

    Data on one "site" dimension with auxiliary coordinate variables along it (a survey,
    station values at one time) is what CF 1.8 chapter 9 calls a collection of points. This
    sets the global ``featureType = "point"`` and removes the ``axis`` attribute from those
    auxiliary coordinates whose ``standard_name`` already says what they are: CF reserves
    ``axis`` for coordinate variables, and tools such as cdo refuse data whose auxiliary
    coordinates carry it. A Dataset that already declares a ``featureType``, or that is not
    of this shape (gridded data, several dimensions), is returned unchanged.

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.

    Returns
    -------
    xarray.Dataset
        A shallow copy (data shared) when anything changed, else ``ds`` itself.

    Examples
    --------
    >>> import numpy as np
    >>> ds = xr.Dataset({"Cd": ("site", [1.0, np.nan])}, coords={
    ...     "x": ("site", [0.0, 1.0], {"standard_name": "projection_x_coordinate", "axis": "X"}),
    ...     "y": ("site", [0.0, 2.0], {"standard_name": "projection_y_coordinate", "axis": "Y"})})
    >>> out = point_geometry(ds)
    >>> out.attrs["featureType"], "axis" in out.x.attrs
    ('point', False)
    """
    if "featureType" in ds.attrs or not ds.data_vars:
        return ds
    dims = {v.dims for v in ds.data_vars.values() if v.ndim > 0}
    if len(dims) != 1:
        return ds
    (only,) = dims
    if len(only) != 1:
        return ds
    (dim,) = only
    positions = [
        name for name, c in ds.coords.items()
        if name != dim and c.dims == (dim,) and (
            c.attrs.get("standard_name") in _POSITION_NAMES or "axis" in c.attrs
        )
    ]
    if not positions:
        return ds
    out = ds.copy(deep=False)
    for name in positions:
        attrs = dict(out[name].attrs)
        if "axis" in attrs and attrs.get("standard_name") in _POSITION_NAMES:
            del attrs["axis"]
            out.variables[name].attrs = attrs
    out.attrs = {**ds.attrs, "featureType": "point"}
    return out


_LON_LAT_ATTRS = (
    {"standard_name": "longitude", "units": "degrees_east"},
    {"standard_name": "latitude", "units": "degrees_north"},
)


def label_lon_lat(ds: xr.Dataset, lon: str, lat: str) -> xr.Dataset:
    """Give the longitude and latitude coordinates their CF ``standard_name`` and ``units``.

    For coordinates recognised as longitude and latitude by their names alone: the output
    says what they are, and scattered data becomes a CF point collection when written (see
    :func:`point_geometry`). Attributes already present are kept.

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.
    lon, lat : str
        The coordinates' names.

    Returns
    -------
    xarray.Dataset
        A shallow copy (data shared).

    Examples
    --------
    >>> ds = xr.Dataset(coords={"lon": ("site", [5.0, 6.0]), "lat": ("site", [46.0, 47.0])})
    >>> label_lon_lat(ds, "lon", "lat").lat.attrs
    {'standard_name': 'latitude', 'units': 'degrees_north'}
    """
    out = ds.copy(deep=False)
    for name, attrs in zip((lon, lat), _LON_LAT_ATTRS, strict=True):
        if name in out.variables:
            out.variables[name].attrs = {**attrs, **out.variables[name].attrs}
    return out


def label_units(ds: xr.Dataset, name: str, units: str) -> xr.Dataset:
    """Give coordinate ``name`` the ``units`` the model was trained on, where it has none.

    New locations given without a ``units`` attribute are taken to be in the training
    data's units: the output says which (for a file, a map's axis labels).

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.
    name : str
        The coordinate's name (nothing is done when ``ds`` lacks it).
    units : str
        Its training units.

    Returns
    -------
    xarray.Dataset
        A shallow copy (data shared).
    """
    out = ds.copy(deep=False)
    if name in out.variables and "units" not in out.variables[name].attrs:
        out.variables[name].attrs = {**out.variables[name].attrs, "units": units}
    return out
