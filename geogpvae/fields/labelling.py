"""CF attributes of a whole output Dataset: provenance, point geometry, coordinate labels."""

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
    """A Python value as a netCDF attribute: booleans as ints, scalars as they are, others as JSON.

    Parameters
    ----------
    value : object

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
    """Record a geogpvae run in ``history`` and ``geogpvae_*`` global attributes (an earlier run's replaced).

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.
    call : str
        How the run was invoked, e.g. ``"impute(ds, vars=['Cd'])"``.
    options : mapping of str to object, optional
        One ``geogpvae_<key>`` attribute each, values as :func:`attr_value`.
    now : datetime, optional
        Time stamp (default now); a naive datetime is taken as UTC.

    Returns
    -------
    xarray.Dataset
        A shallow copy with new global attributes.
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
    """Mark scattered data on one site dim as a CF ``featureType = "point"`` collection.

    Drops ``axis`` from auxiliary coordinates with a ``standard_name`` (cdo refuses it there).

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.

    Returns
    -------
    xarray.Dataset
        A shallow copy when anything changed, else ``ds``.

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
    """Give the longitude and latitude coordinates their CF ``standard_name`` and ``units`` (kept if set).

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.
    lon, lat : str

    Returns
    -------
    xarray.Dataset
        A shallow copy.

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
    """Give coordinate ``name`` (if ``ds`` has it) the training ``units``, where it has none.

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.
    name, units : str

    Returns
    -------
    xarray.Dataset
        A shallow copy.
    """
    out = ds.copy(deep=False)
    if name in out.variables and "units" not in out.variables[name].attrs:
        out.variables[name].attrs = {**out.variables[name].attrs, "units": units}
    return out
