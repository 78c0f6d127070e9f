"""The model's ``x`` at given locations, refusing values that cannot match the geometry."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from ..errors import InputError
from .geometry import Axis, Geometry, sphere_positions

__all__ = ["check_spanned", "coordinates_at", "unspanned_dims"]


def _days(values: np.ndarray, axis: Axis) -> np.ndarray:
    if axis.kind == "time":
        delta = values.astype("datetime64[ns]") - np.datetime64(axis.origin, "ns")
        return delta / np.timedelta64(1, "D")
    if axis.kind == "duration":
        return values.astype("timedelta64[ns]") / np.timedelta64(1, "D")
    import cftime  # only for non-standard calendars

    flat = np.ravel(values)
    ok = np.array([v is not None for v in flat])
    out = np.full(flat.shape, np.nan)
    if ok.any():
        out[ok] = cftime.date2num(
            list(flat[ok]), f"days since {axis.origin}", calendar=axis.calendar
        )
    return out.reshape(values.shape)


def _check_finite(name: str, column: np.ndarray) -> None:
    bad = ~np.isfinite(column)
    if bad.any():
        raise InputError(
            f"coordinate {name!r} is NaN or infinite at {int(bad.sum())} of the locations to "
            "model (NaT for a missing time); "
            "every location needs finite coordinates: fix them, or leave those locations out (drop "
            "them from the locations to predict at; when imputing, exclude them with a mask (mask=))"
        )


def _holds(source: xr.Dataset | xr.DataArray, name: str) -> bool:
    """Whether ``source`` has a coordinate (or, a Dataset, a variable) called ``name``."""
    return name in source.coords or (isinstance(source, xr.Dataset) and name in source.variables)


def _raw(
    source: xr.Dataset | xr.DataArray,
    name: str,
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> np.ndarray:
    """One coordinate's values (or a dim's positions) at the flat ``index`` of ``shape``."""
    if _holds(source, name):
        var = source[name]
    elif name in dims:
        var = xr.DataArray(np.arange(shape[list(dims).index(name)]), dims=(name,))
    else:
        raise InputError(f"coordinate {name!r} (used by the model) is missing")
    if var.ndim == 0:  # a scalar coordinate (one time step picked by isel): every location's
        return np.full(len(index), var.values[()])
    missing = [str(d) for d in var.dims if d not in dims]
    if missing:
        raise InputError(
            f"coordinate {name!r} is on dims {tuple(var.dims)}, not among {tuple(dims)}"
        )
    return _take(var, dims, shape, index)


def _columns(
    source: xr.Dataset | xr.DataArray,
    axis: Axis,
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> np.ndarray:
    if axis.kind == "sphere":
        lon, lat = (
            np.asarray(_raw(source, n, dims, shape, index), dtype=np.float64) for n in axis.names
        )
        _check_finite(axis.names[0], lon)
        _check_finite(axis.names[1], lat)
        _check_degrees(source, axis.names)
        _check_range("longitude", axis.names[0], lon, 360, axis.names)
        _check_range("latitude", axis.names[1], lat, 90, axis.names)
        return sphere_positions(lon, lat) * axis.scale
    if axis.kind == "index":  # positions, whatever labels the dim may carry
        source = source.drop_vars(axis.names[0], errors="ignore")
    raw = _raw(source, axis.names[0], dims, shape, index)
    _check_time_kind(axis, raw.dtype, raw.dtype.kind == "O" and raw.size > 0 and hasattr(raw.flat[0], "calendar"))
    if axis.kind in ("time", "cftime", "duration"):
        col = _days(raw, axis)
    elif axis.kind == "index":
        col = raw.astype(np.float64)
    else:
        _check_units(source, axis)
        col = np.asarray(raw, dtype=np.float64)
    _check_finite(axis.names[0], col)
    return (col * axis.scale)[:, None]


#: spellings of one unit, as UDUNITS accepts them, mapped to one key
_UNIT_ALIASES = {
    alias: key
    for key, aliases in {
        "m": ("m", "meter", "meters", "metre", "metres"),
        "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
        "cm": ("cm", "centimeter", "centimeters", "centimetre", "centimetres"),
        "ft": ("ft", "foot", "feet"),
        "degree": ("degree", "degrees", "deg"),
    }.items()
    for alias in aliases
}


def _unit_key(units: str) -> str:
    """``units`` in one spelling (``"metres"`` and ``"m"`` alike), else as written."""
    text = " ".join(units.strip().lower().split())
    return _UNIT_ALIASES.get(text, text)


#: the dtype kinds refused for a time axis (strings of dates are parsed), and what it needs
_TIME_KINDS = {"time": ("biufm", "dates (datetime64)"), "duration": ("biufM", "durations (timedelta64)")}


def _check_time_kind(axis: Axis, dtype: np.dtype, is_dates: bool = False) -> None:
    """Refuse numbers for a time axis and times for a numeric one (NumPy would read 60 as 60 ns)."""
    name = axis.names[0]
    wanted = _TIME_KINDS.get(axis.kind)
    if wanted is not None and dtype.kind in wanted[0]:
        raise InputError(
            f"coordinate {name!r} holds {dtype} values, but the model was trained on {wanted[1]}: "
            f"give {name!r} as {wanted[1].split(' ')[0]} (decode the file's times, e.g. keep "
            "decode_times on, or give its units such as 'days since 2020-01-01')"
        )
    if axis.kind == "cftime" and dtype.kind in "biuf":
        raise InputError(
            f"coordinate {name!r} holds numbers, but the model was trained on {axis.calendar} "
            "calendar dates: give it as dates (cftime objects, as xarray decodes them)"
        )
    if axis.kind in ("linear", "index") and (dtype.kind in "mM" or (dtype.kind == "O" and is_dates)):
        raise InputError(
            f"coordinate {name!r} holds {dtype} values, but the model was trained on plain "
            f"numbers for {name!r}: give the same numbers (e.g. open the file with "
            "decode_times=False, as for training)"
        )


def _says_degrees(units: str) -> bool:
    """Whether ``units`` spells degrees: ``degrees_east``, ``deg``, ``°E``, GIS's ``dd``..."""
    text = units.strip().lower()
    return "deg" in text or bool({"\u00b0", "\u00ba"} & set(text)) or text in ("dd", "dd_e", "dd_n")


#: units that count degrees the other way (CF allows them); read as east or north they would mirror the map
_REVERSED_DEGREES = {"degrees_west": "east", "degree_west": "east", "degree_w": "east", "degrees_w": "east",
                     "degreew": "east", "degreesw": "east", "degrees_south": "north", "degree_south": "north",
                     "degree_s": "north", "degrees_s": "north", "degreess": "north"}


def _check_range(what: str, name: str, values: np.ndarray, limit: float, names: Sequence[str]) -> None:
    """Refuse longitudes beyond [-360, 360] and latitudes beyond [-90, 90] degrees (never wrapped)."""
    if not np.any(np.abs(values) > limit):
        return
    lon, lat = names
    raise InputError(
        f"{what} {name!r} has values outside [-{limit:g}, {limit:g}] degrees (min {values.min():g}, max "
        f"{values.max():g}), so they are not degrees: if they are projected coordinates (metres, km), "
        f"name them x and y (ds.rename({{{lon!r}: 'x', {lat!r}: 'y'}})) or give them the standard_name "
        "projection_x_coordinate and projection_y_coordinate; if they are degrees, bring longitudes into "
        "[-180, 360] and latitudes into [-90, 90]"
    )


def _check_degrees(source: xr.Dataset | xr.DataArray, names: Sequence[str]) -> None:
    """Refuse longitudes/latitudes whose ``units`` are not degrees, or count west or south."""
    for name in names:
        units = source[name].attrs.get("units") if _holds(source, name) else None
        reversed_to = None
        if isinstance(units, str):  # "degreeS" is south; lower-cased it would read "degrees"
            reversed_to = "north" if units.strip() == "degreeS" else _REVERSED_DEGREES.get(units.strip().lower())
        if reversed_to is not None:
            raise InputError(
                f"coordinate {name!r} is in {units!r}, but geogpvae reads degrees {reversed_to}: count them "
                f"the other way first, ds.assign_coords({{{name!r}: (-ds[{name!r}]).assign_attrs("
                f"units='degrees_{reversed_to}')}})"
            )
        if isinstance(units, str) and units.strip() and not _says_degrees(units):
            raise InputError(
                f"coordinate {name!r} is in {units!r}, but longitudes and latitudes are taken in "
                "degrees: convert it (np.degrees for radians) and set its units to "
                "degrees_east or degrees_north"
            )


def _check_units(source: xr.Dataset | xr.DataArray, axis: Axis) -> None:
    """Refuse a coordinate whose ``units`` attribute differs from the one trained on."""
    name = axis.names[0]
    units = source[name].attrs.get("units") if _holds(source, name) else None
    if axis.units is None or not isinstance(units, str):
        return
    if _unit_key(units) != _unit_key(axis.units):
        raise InputError(
            f"coordinate {name!r} is in {units!r}, but the model was trained on {axis.units!r}: "
            f"convert it to {axis.units!r} (values and units attribute) first"
        )


def coordinates_at(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> np.ndarray:
    """``x`` at the flat C-order ``index`` of the grid ``shape`` over ``dims``.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
        Holds the coordinates; a scalar one applies to every location.
    geometry : Geometry
    dims, shape : sequence of str, sequence of int
    index : ndarray of int, shape (M,)

    Returns
    -------
    ndarray of float64, shape (M, D)

    Raises
    ------
    InputError
        A coordinate is missing, on other dims, in other units, or not finite.
    """
    if not geometry.axes:
        return np.zeros((len(index), 0))
    return np.concatenate([_columns(source, a, dims, shape, index) for a in geometry.axes], axis=1)


def unspanned_dims(
    source: xr.Dataset | xr.DataArray, geometry: Geometry, dims: Sequence[str], shape: Sequence[int]
) -> list[tuple[str, int]]:
    """The dims (longer than 1) along which none of the geometry's coordinates varies.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
    geometry : Geometry
    dims, shape : sequence of str, sequence of int

    Returns
    -------
    list of (str, int)
        Each such dim and its length.
    """
    spanned = set()
    for axis in geometry.axes:
        for name in axis.names:
            held = axis.kind != "index" and _holds(source, name)
            spanned.update(map(str, source[name].dims) if held else [name])
    return [(str(d), int(n)) for d, n in zip(dims, shape) if str(d) not in spanned and n > 1]


def check_spanned(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    dims: Sequence[str],
    shape: Sequence[int],
    trained_dims: Sequence[str] = (),
) -> None:
    """Refuse a dim (longer than 1, not in ``trained_dims``) along which no model coordinate varies.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
    geometry : Geometry
        The fitted model's.
    dims, shape : sequence of str, sequence of int
    trained_dims : sequence of str

    Raises
    ------
    InputError
        Naming the dim and how to impute its slices one at a time.
    """
    for dim, size in unspanned_dims(source, geometry, dims, shape):
        if dim not in trained_dims:
            names = ", ".join(n for a in geometry.axes for n in a.names)
            raise InputError(
                f"the variables have a dim {dim!r} ({size} long) along which none of the model's "
                f"coordinates ({names}) varies: its slices would be taken for values at the same "
                f"locations. Impute them one at a time, e.g. xr.concat([imputer.impute(ds.isel({dim}=i)) "
                f"for i in range({size})], dim={dim!r}), or fit a model on coordinates that include {dim!r}"
            )


def _take(
    var: xr.DataArray, dims: Sequence[str], shape: Sequence[int], index: np.ndarray
) -> np.ndarray:
    """Values of ``var`` at the flat C-order ``index`` of ``shape``, without broadcasting the grid."""
    own = [d for d in dims if d in var.dims]
    arr = np.asarray(var.transpose(*own).values)
    where = np.unravel_index(index, tuple(shape))
    return arr[tuple(where[list(dims).index(d)] for d in own)]
