"""Coordinate roles: which coordinates form the model's ``x``, and what each stands for."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from ..errors import CoordinateWarning, InputError, warn_caller

__all__ = ["choose_coordinates", "coordinate_role"]

_STANDARD_NAME_ROLES = {
    "longitude": "lon",
    "latitude": "lat",
    # rotated-pole grids (CORDEX's rlon/rlat): the same sphere, the pole moved
    "grid_longitude": "lon",
    "grid_latitude": "lat",
    "time": "time",
    "projection_x_coordinate": "x",
    "projection_y_coordinate": "y",
    "depth": "z",
    "altitude": "z",
    "height": "z",
}
_LON_UNITS = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}
_LAT_UNITS = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}
_SPHERE_NAMES = {"lon": "lon", "longitude": "lon", "lat": "lat", "latitude": "lat"}
_AXIS_ROLES = {"X": "x", "Y": "y", "Z": "z", "T": "time"}
_NAME_ROLES = {"x": "x", "y": "y", "z": "z", "depth": "z", "time": "time"}


def _warn(message: str) -> None:
    """Warn with a :class:`CoordinateWarning` attributed to the caller outside geogpvae."""
    warn_caller(message, CoordinateWarning)


# --------------------------------------------------------------------------- coordinates
def coordinate_role(name: str, var: xr.DataArray) -> str | None:
    """What a coordinate variable stands for: ``x``, ``y``, ``z``, ``time``, ``lon``, ``lat``.

    By CF ``standard_name``, degree ``units``, lon/lat names, CF ``axis``, a time dtype, then
    the names ``x``, ``y``, ``z``, ``depth``, ``time``.

    Parameters
    ----------
    name : str
    var : xarray.DataArray

    Returns
    -------
    str or None
    """
    attrs = var.attrs
    sn = attrs.get("standard_name")
    if isinstance(sn, str) and sn.strip().lower() in _STANDARD_NAME_ROLES:
        return _STANDARD_NAME_ROLES[sn.strip().lower()]
    units = attrs.get("units")
    if isinstance(units, str):
        key = units.strip().lower()
        if key in _LON_UNITS:
            return "lon"
        if key in _LAT_UNITS:
            return "lat"
    lower = str(name).lower()
    if lower in _SPHERE_NAMES:
        return _SPHERE_NAMES[lower]
    axis = attrs.get("axis")
    if isinstance(axis, str) and axis.strip().upper() in _AXIS_ROLES:
        return _AXIS_ROLES[axis.strip().upper()]
    if _time_kind(var) in ("time", "cftime"):
        return "time"
    return _NAME_ROLES.get(lower)


def _time_kind(var: xr.DataArray) -> str | None:
    dtype = var.dtype
    if np.issubdtype(dtype, np.datetime64):
        return "time"
    if np.issubdtype(dtype, np.timedelta64):
        return "duration"
    if dtype.kind == "O" and var.size:
        first = np.ravel(np.asarray(var.values))[0]
        if hasattr(first, "calendar") and hasattr(first, "timetuple"):
            return "cftime"
    return None


def _usable(var: xr.DataArray) -> bool:
    return (_is_numeric(var.dtype) and var.dtype != bool) or _time_kind(var) is not None


def _candidates(ds: xr.Dataset, dims: Sequence[str]) -> list[str]:
    """Coordinate variables on the dims: the dims' own coordinates first, then the others."""
    own = [d for d in dims if d in ds.coords and ds[d].dims == (d,)]
    others = [
        str(n)
        for n, c in ds.coords.items()
        if str(n) not in own and c.dims and set(map(str, c.dims)) <= set(dims)
    ]
    return [n for n in own + others if _usable(ds[n])]


def _standard_name(var: xr.DataArray) -> str:
    name = var.attrs.get("standard_name")
    return name.strip().lower() if isinstance(name, str) else ""


def _deduplicate_roles(chosen: list[tuple[str, str]]) -> list[tuple[str, str]]:
    kept: dict[str, str] = {}
    for name, role in chosen:
        if role in kept:
            _warn(
                f"coordinates {kept[role]!r} and {name!r} both look like {role}; "
                f"using {kept[role]!r} "
                f"(name the coordinates with coords=[...] to use {name!r})"
            )
            continue
        kept[role] = name
    return [(n, r) for n, r in chosen if kept.get(r) == n]


def _cover_dims(
    ds: xr.Dataset, dims: Sequence[str], chosen: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Add, for each dim of a grid that nothing chosen spans, its coordinate or its positions."""
    covered = {str(d) for name, _ in chosen for d in ds[name].dims}
    out = list(chosen)
    for d in dims:
        if d in covered:
            continue
        if d in ds.coords and ds[d].dims == (d,) and _usable(ds[d]):
            out.append((d, coordinate_role(d, ds[d]) or "other"))
            continue
        positions = f"its integer positions 0..{ds.sizes[d] - 1} are used as its coordinate"
        if d in ds.coords:  # labels, e.g. station names: not distances
            first = np.ravel(ds[d].values)[:1].tolist()
            _warn(
                f"dim {d!r} is labelled with {ds[d].dtype} values (e.g. {first[0]!r}), not numbers "
                f"or times: {positions} (give its locations coordinates on {d!r}, e.g. lat/lon, "
                "for real distances)"
            )
        else:
            _warn(f"dim {d!r} has no coordinate variable: {positions}" + _unused_note(ds, dims, d, out))
        out.append((d, "index"))
    return out


def _unused_note(ds: xr.Dataset, dims: Sequence[str], d: str, chosen: list[tuple[str, str]]) -> str:
    """How to give dim ``d`` real distances, naming the coordinates on it left unrecognised."""
    unused = [n for n in _candidates(ds, dims) if d in ds[n].dims and all(n != c for c, _ in chosen)]
    if not unused:
        return " (give it one, e.g. ds.assign_coords, for real distances)"
    names = ", ".join(f"{n!r} {tuple(map(str, ds[n].dims))}" for n in unused)
    use = [c for c, _ in chosen] + [unused[0]]
    lie = f"coordinates {names} lie on it but are" if len(unused) > 1 else f"coordinate {names} lies on it but is"
    return (f"; {lie} not recognised as x, y, z, depth or time: for real distances name it "
            f"with coords={use} (--coords {','.join(use)}), or give it a CF standard_name (e.g. 'depth') "
            "or axis")


def _detect(ds: xr.Dataset, dims: Sequence[str]) -> list[tuple[str, str]]:
    found = [(n, coordinate_role(n, ds[n])) for n in _candidates(ds, dims)]
    chosen = [(n, r) for n, r in found if r is not None]
    roles = {r for _, r in chosen}
    if {"x", "y"} <= roles and {"lon", "lat"} & roles:
        chosen = [(n, r) for n, r in chosen if r not in ("lon", "lat")]
    if {"grid_longitude", "grid_latitude"} <= {_standard_name(ds[n]) for n, _ in chosen}:
        # a rotated grid's true lon/lat (2-D) are the same places: its own coordinates suffice
        chosen = [(n, r) for n, r in chosen if r not in ("lon", "lat") or _standard_name(ds[n]).startswith("grid_")]
    chosen = _deduplicate_roles(chosen)
    if len(dims) == 1 and not chosen:
        coord = [n for n, _ in found]
        raise InputError(
            f"no coordinates found for the locations along {dims[0]!r}"
            + (
                f" (coordinate variables {coord} are not recognised as x, y, z, lon, lat, "
                "depth or time)"
                if coord
                else ""
            )
            + _coordinate_like_advice(ds, dims)
        )
    if len(dims) == 1:
        _warn_unrecognised(ds, dims[0], [n for n, r in found if r is None and n != dims[0]], chosen)
    return _cover_dims(ds, dims, chosen)


def _warn_unrecognised(ds: xr.Dataset, dim: str, unused: list[str], chosen: list[tuple[str, str]]) -> None:
    """Warn that scattered sites' coordinates (a soil sample's ``depth_cm``) are left unused."""
    if unused:  # two samples at one place and two depths would be one location, unsaid
        _warn(
            f"coordinates {unused} on {dim!r} not used: not recognised as x, y, z, depth or "
            "time, so sites differing only in them are one location to the model; to use them, "
            f"name the coordinates with coords={[n for n, _ in chosen] + unused} (in their own "
            "units: see coord_scale) or give them a CF standard_name"
        )


def _coordinate_like_advice(ds: xr.Dataset, dims: Sequence[str]) -> str:
    """How to name the coordinates, naming data variables that look like them (a table's lon, lat)."""
    like = [
        str(n)
        for n, v in ds.data_vars.items()
        if v.dims and set(map(str, v.dims)) <= set(dims) and _usable(v)
        and coordinate_role(str(n), v) is not None
    ]
    if not like:
        return ": name them with coords=[...], e.g. coords=['x', 'y']"
    return (
        f"; data variables {like} look like coordinates but only coordinate variables are "
        f"detected: name them with coords={like} (or make them coordinates, ds.set_coords({like}))"
    )


def _named(ds: xr.Dataset, dims: Sequence[str], coords: Sequence[str]) -> list[tuple[str, str]]:
    names = [coords] if isinstance(coords, str) else [str(c) for c in coords]
    if not names:
        raise InputError("coords is empty: name at least one coordinate, or leave coords=None")
    if len(set(names)) != len(names):
        raise InputError(f"coords names a coordinate twice: {names}")
    out = []
    for name in names:
        if name not in ds.variables:
            if name in dims:
                out.append((name, "index"))
                continue
            usable = sorted(map(str, _candidates(ds, dims)))
            raise InputError(
                f"coordinate {name!r} is not in the Dataset; coordinates on the variables' "
                f"dims: {', '.join(usable) or 'none'}"
            )
        var = ds[name]
        bad = [str(d) for d in var.dims if d not in dims]
        if bad or not var.dims:
            raise InputError(
                f"coordinate {name!r} is on dims {tuple(var.dims)}; it must lie on the "
                f"variables' dims {tuple(dims)}"
            )
        if not _usable(var):
            raise TypeError(
                f"coordinate {name!r} has dtype {var.dtype}; coordinates must be numbers or times"
            )
        out.append((name, coordinate_role(name, var) or "other"))
    return out


def choose_coordinates(
    ds: xr.Dataset, dims: Sequence[str], coords: str | Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """The coordinates that form ``x``, with their roles.

    Without ``coords``, coordinate variables (never data variables) on ``dims`` are classified by
    :func:`coordinate_role`; projected ``x``/``y`` win over ``lon``/``lat``, one per role is kept,
    and a grid dim nothing spans uses its coordinate or its positions (with a warning).

    Parameters
    ----------
    ds : xarray.Dataset
    dims : sequence of str
    coords : str or sequence of str, optional
        Names given by the user (variables, or dims without coordinate variable).

    Returns
    -------
    list of (name, role)
        Roles as :func:`coordinate_role`, or ``other`` (a plain number), ``index`` (positions).

    Raises
    ------
    InputError
        An unknown or misplaced name, or no coordinates for scattered data.
    """
    if coords is not None:
        return _named(ds, dims, coords)
    return _detect(ds, dims)


# --------------------------------------------------------------------------- variables
def _is_numeric(dtype: np.dtype) -> bool:
    """Real numbers: integers or floats (not complex, bool, times or objects)."""
    return np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
