"""Coordinate roles and geometry: which coordinates form the model's ``x``, and how.

Which coordinates form ``x``
----------------------------
``coords=[...]`` names them (coordinate or data variables, or dims without a coordinate
variable, whose integer positions are then used). Otherwise the *coordinate* variables
(``ds.coords``; data variables never, unless named) on the variables' dims are classified by
their CF ``standard_name``, ``units`` (``degrees_east``/``degrees_north``), ``axis`` and
dtype, and by the common names ``x``, ``y``, ``z``, ``lon``/``longitude``,
``lat``/``latitude``, ``depth`` and ``time``:

* when both projected ``x`` and ``y`` and ``lon``/``lat`` exist (e.g. Jura), the projected
  ones are used: they are what the data were surveyed in, and distances in them are exact;
* two coordinates with the same role (e.g. ``z`` and ``depth``) are not both used: the dim's
  own coordinate, else the first, is kept (with a warning);
* a dim of a grid (variables on two or more dims) that no detected coordinate spans uses
  its coordinate variable whatever its name (e.g. ``layer``), or, when it has none, the
  integer positions ``0..n-1`` with a :class:`CoordinateWarning`;
* variables on one dim with no detected coordinate are refused (pass ``coords=``).

How coordinates become numbers
------------------------------
* Plain numbers are used as they are (in their units).
* Times (``datetime64`` or cftime) become days since the earliest time of the training
  data (fractional days; the origin is kept, so new data use the same one); time
  differences (``timedelta64``) become days.
* Longitude/latitude (degrees) become positions on a sphere of the Earth's mean radius in
  km, ``R (cos lat cos lon, cos lat sin lon, sin lat)`` (three columns of ``x``), so
  neighbours are found across the dateline and near the poles: at neighbour scale the
  chordal distance equals the great-circle distance to within 0.1 % below 500 km. A lone
  longitude or latitude (without the other) is used as a plain number in degrees.
* ``coord_scale={"z": 10.0}`` multiplies a coordinate, in its units, before modelling
  (vertical exaggeration, anisotropy; time in days). For longitude/latitude the scale
  applies to the sphere positions as a whole and may be given under the name of either.
  Coordinates not named keep their default: cell steps on a regular grid (below), their
  units otherwise.
* Without ``coord_scale`` (``None``, the default), a **regular grid in plain numbers** (every
  coordinate of ``x`` a 1-D dimension coordinate with equal steps, none of them time or
  lon/lat) is modelled in cell steps: each coordinate is divided by its step, so that one
  cell counts the same along every axis. Reservoir grids have cells tens of times wider than
  they are thick; in metres a cell's nearest neighbours would all sit in one vertical column
  (SPE10: RMSE 0.49 in metres against 0.44 in cell steps). ``coord_scale={}`` keeps the
  units of every coordinate, and ``coord_scale={"z": 5.0}`` changes ``z`` only. Every other case (scattered data, time, lon/lat, uneven steps) keeps
  its units. The kernels learn one lengthscale per axis either way; the choice matters for
  which locations are neighbours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ..errors import CoordinateWarning, InputError, warn_caller

__all__ = [
    "EARTH_RADIUS_KM",
    "Axis",
    "Geometry",
    "build_geometry",
    "check_spanned",
    "unspanned_dims",
    "choose_coordinates",
    "coordinate_role",
    "coordinates_at",
    "grid_steps",
    "sphere_positions",
]

#: Mean radius of the Earth (IUGG), km: longitude/latitude become positions on this sphere.
EARTH_RADIUS_KM = 6371.0088
_STANDARD_NAME_ROLES = {
    "longitude": "lon",
    "latitude": "lat",
    # rotated-pole grids (CORDEX's rlon/rlat): positions on the same sphere, the pole moved;
    # great-circle distances do not change with the rotation
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

    Checked in this order: CF ``standard_name``; ``units`` ``degrees_east``/
    ``degrees_north``; the names ``lon``/``longitude``/``lat``/``latitude``; CF ``axis``
    (X, Y, Z, T); a datetime dtype (time); the names ``x``, ``y``, ``z``, ``depth``, ``time``.

    Returns
    -------
    str or None
        None when nothing identifies it.
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
    """How to give dim ``d`` real distances, naming the coordinates on it left unrecognised.

    A measured depth stored as a 2-D ``(well, depth)`` coordinate spans ``depth`` but is not
    ``depth``'s own coordinate: the warning names it and the ``coords=`` that would use it.
    """
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
    """How to name the coordinates, naming data variables that look like them (a table's lon, lat).

    ``pandas.DataFrame.to_xarray`` makes every column, ``lon`` and ``lat`` too, a data
    variable: detection never takes those, so the advice names them.
    """
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
    """The coordinates that form ``x``, with their roles (see the module docstring).

    Parameters
    ----------
    ds : xarray.Dataset
    dims : sequence of str
        The variables' dims.
    coords : str or sequence of str, optional
        Names given by the user (variables, or dims without coordinate variable).

    Returns
    -------
    list of (name, role)
        Roles are ``x``, ``y``, ``z``, ``time``, ``lon``, ``lat``, ``other`` (a coordinate
        used as a plain number) or ``index`` (a dim's integer positions).

    Raises
    ------
    InputError
        An unknown or misplaced coordinate name, or no coordinates for scattered data.
    TypeError
        A named coordinate that is neither numbers nor times.
    """
    if coords is not None:
        return _named(ds, dims, coords)
    return _detect(ds, dims)


# --------------------------------------------------------------------------- geometry
@dataclass(frozen=True)
class Axis:
    """One coordinate (or the longitude/latitude pair) and how it becomes columns of ``x``.

    Attributes
    ----------
    kind : {"linear", "index", "time", "cftime", "duration", "sphere"}
        ``linear``: the values times ``scale``; ``index``: the dim's positions ``0..n-1``
        times ``scale``; ``time``/``cftime``: days since ``origin`` times ``scale``;
        ``duration``: days times ``scale``; ``sphere``: three columns, positions in km on
        the Earth's sphere times ``scale``.
    names : tuple of str
        The coordinate (or dim) name; for ``sphere``, ``(lon, lat)``.
    scale : float
        Multiplier applied before modelling.
    origin : str, optional
        Time origin, ISO 8601 (``time``, ``cftime``).
    calendar : str, optional
        Calendar of a cftime coordinate.
    units : str, optional
        The ``units`` attribute of a ``linear`` coordinate at training: new locations whose
        coordinate says other units are refused.
    """

    kind: str
    names: tuple[str, ...]
    scale: float = 1.0
    origin: str | None = None
    calendar: str | None = None
    units: str | None = None

    @property
    def width(self) -> int:
        """Number of columns of ``x``."""
        return 3 if self.kind == "sphere" else 1

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form."""
        return {
            "kind": self.kind,
            "names": list(self.names),
            "scale": float(self.scale),
            "origin": None if self.origin is None else str(self.origin),
            "calendar": None if self.calendar is None else str(self.calendar),
            "units": None if self.units is None else str(self.units),
        }


@dataclass(frozen=True)
class Geometry:
    """How coordinates become the model coordinates ``x`` (N, D).

    Attributes
    ----------
    axes : tuple of Axis
        In column order.
    """

    axes: tuple[Axis, ...]

    @property
    def names(self) -> list[str]:
        """Names of the coordinates (and dims) used, in column order."""
        return [n for a in self.axes for n in a.names]

    @property
    def n_columns(self) -> int:
        """D, the number of columns of ``x``."""
        return sum(a.width for a in self.axes)

    def describe(self) -> str:
        """A short text, e.g. ``"x; y × 2; time as days since 2000-01-01"``."""
        parts = []
        for a in self.axes:
            if a.kind == "sphere":
                text = f"{a.names[0]}/{a.names[1]} as km on a sphere of radius {EARTH_RADIUS_KM} km"
            elif a.kind in ("time", "cftime"):
                text = f"{a.names[0]} as days since {a.origin}"
            elif a.kind == "duration":
                text = f"{a.names[0]} as days"
            elif a.kind == "index":
                text = f"{a.names[0]} as positions 0..n-1"
            else:
                text = a.names[0]
            parts.append(text + (f" \u00d7 {a.scale:g}" if a.scale != 1.0 else ""))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (for saved models)."""
        return {"axes": [a.to_dict() for a in self.axes]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Geometry:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            tuple(
                Axis(
                    kind=a["kind"],
                    names=tuple(a["names"]),
                    scale=float(a["scale"]),
                    origin=a.get("origin"),
                    calendar=a.get("calendar"),
                    units=a.get("units"),  # saved before units were kept: not checked
                )
                for a in data["axes"]
            )
        )


def _scales(
    coord_scale: Mapping[str, float] | None, chosen: list[tuple[str, str]]
) -> dict[str, float]:
    scales = {str(k): v for k, v in (coord_scale or {}).items()}
    names = [n for n, _ in chosen]
    unknown = sorted(set(scales) - set(names))
    if unknown:
        raise InputError(
            f"coord_scale names {unknown}, which are not among the coordinates used: {names}"
        )
    for key, value in scales.items():
        ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
        if not ok or not np.isfinite(value) or value <= 0:
            raise InputError(f"coord_scale[{key!r}] must be a positive number, got {value!r}")
    return {k: float(v) for k, v in scales.items()}


def _sphere_scale(scales: Mapping[str, float], lon: str, lat: str) -> float:
    given = {scales[n] for n in (lon, lat) if n in scales}
    if len(given) > 1:
        raise InputError(
            f"coord_scale gives {lon!r} and {lat!r} different scales; they scale the "
            "sphere positions together: give one"
        )
    return given.pop() if given else 1.0


def _time_origin(var: xr.DataArray, kind: str) -> tuple[str, str | None]:
    values = np.ravel(np.asarray(var.values))
    if kind == "time":
        valid = values[~np.isnat(values)]
        if not valid.size:
            raise InputError(f"coordinate {var.name!r} holds no valid time (all NaT)")
        # a plain str: numpy's string type would not load from a saved model (not plain data)
        return str(np.datetime_as_string(valid.min().astype("datetime64[ns]"), unit="ns")), None
    valid = [v for v in values if v is not None]
    if not valid:
        raise InputError(f"coordinate {var.name!r} holds no valid time")
    first = min(valid)
    return first.isoformat(sep=" "), str(first.calendar)


def _make_axis(ds: xr.Dataset, name: str, role: str, scale: float) -> Axis:
    if role == "index":
        return Axis("index", (name,), scale)
    kind = _time_kind(ds[name])
    if kind in ("time", "cftime"):
        origin, calendar = _time_origin(ds[name], kind)
        return Axis(kind, (name,), scale, origin, calendar)
    units = ds[name].attrs.get("units") if kind is None else None
    return Axis(kind or "linear", (name,), scale, units=units if isinstance(units, str) else None)


def grid_steps(ds: xr.Dataset, chosen: list[tuple[str, str]]) -> dict[str, float] | None:
    """The step of each chosen coordinate when they form a regular grid in plain numbers.

    Returns ``{name: step}`` when every chosen coordinate is a 1-D dimension coordinate
    (``ds[name].dims == (name,)``) of plain numbers (not time, not longitude/latitude) with
    at least two values and equal steps (within 1e-6 relative); ``None`` otherwise.
    Dimensions without a coordinate (role ``index``) count with step 1.
    """
    steps: dict[str, float] = {}
    for name, role in chosen:
        if role == "index":
            steps[name] = 1.0
            continue
        if role in ("lon", "lat") or name not in ds.variables:
            return None
        c = ds[name]
        if c.dims != (name,) or _time_kind(c) is not None or not np.issubdtype(c.dtype, np.number):
            return None
        values = np.asarray(c.values, dtype=float)
        if values.size < 2 or not np.all(np.isfinite(values)):
            return None
        diffs = np.abs(np.diff(values))
        step = float(np.median(diffs))
        if step <= 0 or not np.allclose(diffs, step, rtol=1e-6, atol=0.0):
            return None
        steps[name] = step
    return steps


def build_geometry(
    ds: xr.Dataset, chosen: list[tuple[str, str]], coord_scale: Mapping[str, float] | None = None
) -> Geometry:
    """The :class:`Geometry` of the chosen coordinates.

    A ``lon`` and a ``lat`` become one sphere axis (at the place of the first); time
    coordinates get their origin (the earliest time of ``ds``). With ``coord_scale=None``,
    a regular grid in plain numbers is put in cell steps (see :func:`grid_steps` and the
    module docstring); a ``coord_scale`` that names some axes changes those and keeps the
    default of the others, and ``coord_scale={}`` keeps every unit. The scales chosen are
    part of the geometry, so new locations are scaled the same way.

    Raises
    ------
    InputError
        ``coord_scale`` names an unused coordinate, or has a non-positive value.
    """
    given = _scales(coord_scale, chosen) if coord_scale else {}
    if coord_scale is not None and not coord_scale:
        scales = {}  # coord_scale={}: every coordinate in its own units
    else:
        # the cell-step default (on a regular grid), then the axes named in coord_scale
        steps = grid_steps(ds, chosen)
        scales = {} if steps is None else {n: 1.0 / v for n, v in steps.items() if v != 1.0}
        scales.update(given)
    roles = {r: n for n, r in chosen}
    sphere = "lon" in roles and "lat" in roles
    axes: list[Axis] = []
    for name, role in chosen:
        if sphere and role in ("lon", "lat"):
            if not any(a.kind == "sphere" for a in axes):
                lon, lat = roles["lon"], roles["lat"]
                axes.append(Axis("sphere", (lon, lat), _sphere_scale(scales, lon, lat)))
            continue
        axes.append(_make_axis(ds, name, role, scales.get(name, 1.0)))
    return Geometry(tuple(axes))


def sphere_positions(
    lon: np.ndarray, lat: np.ndarray, radius: float = EARTH_RADIUS_KM
) -> np.ndarray:
    """Positions on a sphere, ``radius (cos lat cos lon, cos lat sin lon, sin lat)``.

    Parameters
    ----------
    lon, lat : ndarray, shape (N,)
        Degrees east and north.
    radius : float
        Sphere radius (default the Earth's mean radius, km).

    Returns
    -------
    ndarray, shape (N, 3)
        Cartesian positions, in the units of ``radius``.
    """
    lo, la = np.deg2rad(lon), np.deg2rad(lat)
    return radius * np.stack(
        [np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], axis=-1
    )


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
        if np.any(np.abs(lat) > 90):
            raise InputError(
                f"latitude {axis.names[1]!r} has values outside [-90, 90] degrees "
                f"(min {lat.min():g}, max {lat.max():g})"
            )
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
    """Refuse numbers for a time axis, and times for a numeric one: NumPy would silently read
    the number 60 as 60 ns after 1970, or a date as nanoseconds since then. ``is_dates``:
    the values are cftime dates (object dtype)."""
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


def _check_degrees(source: xr.Dataset | xr.DataArray, names: Sequence[str]) -> None:
    """Refuse longitudes or latitudes whose ``units`` say they are not in degrees, or count
    them westward or southward."""
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
    """``x`` at the flat ``index`` of the grid ``shape`` over ``dims``; a scalar (0-d)
    coordinate gives every location its value.

    Returns
    -------
    ndarray of float64, shape (len(index), D)

    Raises
    ------
    InputError
        A coordinate is missing, on other dims, or not finite at a location of ``index``.
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
        The data, holding the coordinates.
    geometry : Geometry
    dims, shape : sequence of str, sequence of int
        The variables' dims and their lengths.

    Returns
    -------
    list of (str, int)
        Each such dim and its length: the slices along it share their coordinates.
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
    """Refuse a dim (longer than 1) along which none of a trained model's coordinates varies.

    A fitted model imputing a new Dataset would take the slices along such a dim (time steps,
    ensemble members) for values at the same locations and mix them. Dims of the training
    field (``trained_dims``) are accepted: when fitting, named coordinates that leave a dim
    out are the user's choice, and its slices are duplicate points.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
        The new data, holding the model's coordinates.
    geometry : Geometry
        The fitted model's.
    dims, shape : sequence of str, sequence of int
        The variables' dims and their lengths.
    trained_dims : sequence of str
        The training field's dims.

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


# --------------------------------------------------------------------------- variables
def _is_numeric(dtype: np.dtype) -> bool:
    """Real numbers: integers or floats (not complex, bool, times or objects)."""
    return np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)


def _take(
    var: xr.DataArray, dims: Sequence[str], shape: Sequence[int], index: np.ndarray
) -> np.ndarray:
    """Values of ``var`` (dims a subset of ``dims``) at the flat C-order ``index`` of ``shape``.

    Only index arrays of length ``len(index)`` are made: the broadcast grid never is.
    """
    own = [d for d in dims if d in var.dims]
    arr = np.asarray(var.transpose(*own).values)
    where = np.unravel_index(index, tuple(shape))
    return arr[tuple(where[list(dims).index(d)] for d in own)]
