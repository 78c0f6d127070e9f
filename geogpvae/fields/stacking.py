"""The xarray boundary: Datasets in, plain arrays out, and back.

The engines see a field as two arrays: the coordinates ``x`` of N locations, shape (N, D),
and K variables at those locations, shape (N, K), NaN where missing. This module makes them
from a Dataset and puts predictions back in the Dataset's shape. It is the only modelling
module that knows xarray.

Layouts
-------
*Gridded* variables lie on 1-4 dims with 1-D coordinate variables, e.g. ``(z, y, x)`` or
``(time, lat, lon)``; every grid cell is a location. *Scattered* variables lie on one dim
(e.g. ``site``) with coordinate variables along it (``x``, ``y``, maybe ``depth``,
``time``); every site is a location. Both are handled alike: each coordinate used is
broadcast over the variables' dims and every element of that shape is a location, so dims
may come in any order, coordinates may be ascending or descending and unevenly spaced, and
mixed layouts such as station time series ``(time, site)`` with ``x(site)``, ``y(site)``
work too.

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
* ``coord_scale={"z": 10.0}`` multiplies a coordinate before modelling (vertical
  exaggeration, anisotropy; time in days). For longitude/latitude the scale applies to the
  sphere positions as a whole and may be given under the name of either. Coordinates not
  named keep their units.
* Without ``coord_scale`` (``None``, the default), a **regular grid in plain numbers** (every
  coordinate of ``x`` a 1-D dimension coordinate with equal steps, none of them time or
  lon/lat) is modelled in cell steps: each coordinate is divided by its step, so that one
  cell counts the same along every axis. Reservoir grids have cells tens of times wider than
  they are thick; in metres a cell's nearest neighbours would all sit in one vertical column
  (SPE10: RMSE 0.49 in metres against 0.44 in cell steps). ``coord_scale={}`` keeps the
  units as they are. Every other case (scattered data, time, lon/lat, uneven steps) keeps
  its units. The kernels learn one lengthscale per axis either way; the choice matters for
  which locations are neighbours.

Domain and missing values
-------------------------
Missing values are NaN (xarray decodes ``_FillValue``/``missing_value`` on open). A
``mask`` marks the domain: cells where it is False are neither used for training nor filled;
only the locations inside the domain reach the engine, so their coordinates alone must be
finite. Duplicate locations are kept as separate points (the engine's nugget keeps prior
covariances positive definite); no value is merged, moved or dropped.

Memory
------
:func:`prepare_field` loads (computes, for dask) only the variables, coordinates and mask
it needs. A :class:`Field` holds ``x`` (N, D) float64, the K variables as (N, K) float64
for the N locations inside the domain, and each variable's original array (a view for
in-memory data, the computed array for dask).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..errors import CoordinateWarning, InputError, warn_caller

__all__ = [
    "EARTH_RADIUS_KM",
    "Axis",
    "Field",
    "Geometry",
    "build_geometry",
    "choose_coordinates",
    "coordinate_role",
    "domain_mask",
    "locations",
    "parse_transforms",
    "prepare_field",
    "select_variables",
    "sphere_positions",
    "stack_field",
    "variable_dims",
]

#: Mean radius of the Earth (IUGG), km: longitude/latitude become positions on this sphere.
EARTH_RADIUS_KM = 6371.0088

_STANDARD_NAME_ROLES = {
    "longitude": "lon",
    "latitude": "lat",
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
_TRANSFORMS = {"log": "log", "none": None, "identity": None}
_OUTPUT_SUFFIXES = ("_std", "_imputed")
_REFERENCE_ATTRS = ("bounds", "climatology", "grid_mapping", "ancillary_variables")


def _warn(message: str) -> None:
    """Warn with a :class:`CoordinateWarning` attributed to the caller outside geogpvae."""
    warn_caller(message, CoordinateWarning)


# --------------------------------------------------------------------------- variables
def _is_numeric(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.number)


def _is_flag(var: xr.DataArray) -> bool:
    return "flag_values" in var.attrs or "flag_meanings" in var.attrs or "flag_masks" in var.attrs


def _referenced_names(ds: xr.Dataset) -> set[str]:
    """Variables that other variables name as bounds, grid mapping, cell measures, etc."""
    names: set[str] = set()
    for var in ds.variables.values():
        for key in _REFERENCE_ATTRS:
            value = var.attrs.get(key)
            if isinstance(value, str):
                names.update(value.split())
        measures = var.attrs.get("cell_measures")
        if isinstance(measures, str):
            names.update(w for w in measures.split() if not w.endswith(":"))
    return names


def _is_output(name: str, ds: xr.Dataset) -> bool:
    """``v_std`` or ``v_imputed`` of a variable ``v`` present in ``ds``."""
    return any(name.endswith(s) and name[: -len(s)] in ds.data_vars for s in _OUTPUT_SUFFIXES)


def _default_candidates(ds: xr.Dataset, exclude: set[str]) -> list[str]:
    referenced = _referenced_names(ds)
    out = []
    for name, var in ds.data_vars.items():
        name = str(name)
        if name in exclude or name in referenced or not var.dims:
            continue
        if not _is_numeric(var.dtype) or _is_flag(var) or _is_output(name, ds):
            continue
        out.append(name)
    return out


def select_variables(
    ds: xr.Dataset, vars: str | Sequence[str] | None = None, *, exclude: Sequence[str] = ()
) -> list[str]:
    """The variables to impute.

    Parameters
    ----------
    ds : xarray.Dataset
    vars : str or sequence of str, optional
        Names given by the user; checked to exist and be numeric. Default: every numeric
        data variable with at least one dim, except CF flag variables (``flag_values``/
        ``flag_meanings``), earlier outputs ``v_std``/``v_imputed`` of a variable ``v`` in
        ``ds``, variables other variables name as ``bounds``, ``grid_mapping``,
        ``cell_measures`` or ``ancillary_variables``, and ``exclude``. When these lie on
        different dims, those with the most dims are taken and the others left out with a
        :class:`CoordinateWarning`.
    exclude : sequence of str
        Names never taken by default (the mask variable, data variables used as coordinates).

    Returns
    -------
    list of str

    Raises
    ------
    InputError
        A name is not in ``ds`` (the message lists the data variables), no variable is left,
        or the default variables' dims are ambiguous.
    TypeError
        A named variable is not numeric.
    """
    if vars is None:
        names = _default_candidates(ds, set(exclude))
        if not names:
            raise InputError(
                "no numeric data variable to impute in the Dataset "
                f"(data variables: {', '.join(map(str, ds.data_vars)) or 'none'}); pass vars=[...]"
            )
        return _widest_group(ds, names)
    names = [vars] if isinstance(vars, str) else [str(v) for v in vars]
    if not names:
        raise InputError("vars is empty: name at least one variable to impute")
    if len(set(names)) != len(names):
        raise InputError(f"vars names a variable twice: {names}")
    for name in names:
        if name not in ds.data_vars:
            where = " (it is a coordinate)" if name in ds.coords else ""
            raise InputError(
                f"variable {name!r} is not a data variable of the Dataset{where}; "
                f"available: {', '.join(map(str, ds.data_vars)) or 'none'}"
            )
        dtype = ds[name].dtype
        if not _is_numeric(dtype):
            raise TypeError(
                f"variable {name!r} has dtype {dtype}, not a number: only numeric variables can "
                "be imputed (leave it out of vars, or convert it, e.g. .astype(float))"
            )
    return names


def _widest_group(ds: xr.Dataset, names: list[str]) -> list[str]:
    groups: dict[frozenset[Hashable], list[str]] = {}
    for name in names:
        groups.setdefault(frozenset(ds[name].dims), []).append(name)
    if len(groups) == 1:
        return names
    most = max(len(d) for d in groups)
    widest = [d for d in groups if len(d) == most]
    if len(widest) > 1:
        listing = "; ".join(
            f"{', '.join(groups[d])} on {tuple(ds[groups[d][0]].dims)}" for d in groups
        )
        raise InputError(
            f"the numeric variables lie on different dims ({listing}); "
            "choose the ones to impute together with vars=[...]"
        )
    chosen = groups[widest[0]]
    left = [n for n in names if n not in chosen]
    _warn(
        f"imputing {', '.join(chosen)} on {tuple(ds[chosen[0]].dims)}; left out "
        f"{', '.join(left)} (on other dims; pass vars=[...] to choose)"
    )
    return chosen


def variable_dims(ds: xr.Dataset, names: Sequence[str]) -> tuple[str, ...]:
    """The dims shared by all ``names``, in the order of the first.

    Raises
    ------
    InputError
        The variables do not all have the same set of dims, or none has a dim.
    """
    first = tuple(str(d) for d in ds[names[0]].dims)
    if not first:
        raise InputError(f"variable {names[0]!r} has no dims: there is nothing to impute")
    for name in names[1:]:
        dims = tuple(str(d) for d in ds[name].dims)
        if set(dims) != set(first):
            raise InputError(
                f"variables on different dims: {names[0]!r} on {first} but {name!r} on {dims}; "
                "impute variables on different dims in separate calls"
            )
    return first


def parse_transforms(
    transform: str | Mapping[str, str | None] | None, names: Sequence[str] | None = None
) -> dict[str, str | None]:
    """Per-variable transforms as ``{name: "log" or None}``.

    Parameters
    ----------
    transform : str, mapping or None
        ``None`` (no transform), one transform for every variable (``"log"``), or a mapping
        ``{"kx": "log"}``; values ``"log"`` or ``None``/``"none"``/``"identity"``.
    names : sequence of str, optional
        The variables; a mapping must name only these. Without ``names`` only the values
        are checked (and the mapping returned).

    Returns
    -------
    dict of str to str or None

    Raises
    ------
    InputError
        An unknown transform, or a mapping naming a variable not imputed.
    """

    def one(value: Any, label: str) -> str | None:
        if value is None:
            return None
        key = str(value).strip().lower() if isinstance(value, str) else None
        if key not in _TRANSFORMS:
            raise InputError(f"unknown transform {value!r} for {label}; use 'log' or None")
        return _TRANSFORMS[key]

    if transform is None or isinstance(transform, str):
        value = one(transform, "every variable")
        return {n: value for n in (names or [])}
    if not isinstance(transform, Mapping):
        raise InputError(f"transform must be a str, a dict or None, got {type(transform).__name__}")
    parsed = {str(k): one(v, repr(k)) for k, v in transform.items()}
    if names is not None:
        unknown = sorted(set(parsed) - set(names))
        if unknown:
            raise InputError(
                f"transform names {unknown}, which are not imputed; imputed: {list(names)}"
            )
        return {n: parsed.get(n) for n in names}
    return parsed


# --------------------------------------------------------------------------- broadcasting
def _sizes(obj: xr.Dataset | xr.DataArray) -> dict[str, int]:
    return {str(k): int(v) for k, v in obj.sizes.items()}


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


def _expand(var: xr.DataArray, dims: Sequence[str], shape: Sequence[int]) -> np.ndarray:
    """Values of ``var`` (dims a subset of ``dims``) broadcast to ``shape``, a read-only view."""
    own = [d for d in dims if d in var.dims]
    arr = np.asarray(var.transpose(*own).values)
    arr = arr.reshape([n if d in var.dims else 1 for d, n in zip(dims, shape, strict=True)])
    return np.broadcast_to(arr, tuple(shape))


def domain_mask(
    ds: xr.Dataset,
    mask: xr.DataArray | str | None,
    dims: Sequence[str],
    template: xr.DataArray | None = None,
) -> np.ndarray:
    """The domain as a boolean array over ``dims`` (True inside).

    Parameters
    ----------
    ds : xarray.Dataset
    mask : DataArray, str or None
        Boolean (or 0/1) DataArray on a subset of ``dims``, with coordinates matching those
        of ``ds``; or the name of such a variable in ``ds``; None: everywhere.
    dims : sequence of str
        The variables' dims.
    template : DataArray, optional
        A variable on ``dims``, to check that the mask's coordinates line up.

    Returns
    -------
    ndarray of bool, shape of ``dims``

    Raises
    ------
    InputError
        Unknown mask variable, dims not among ``dims``, coordinates that differ, NaN.
    TypeError
        A mask that is neither DataArray nor str, or non-numeric.
    """
    sizes = _sizes(ds)
    shape = tuple(sizes[d] for d in dims)
    if mask is None:
        return np.ones(shape, dtype=bool)
    if isinstance(mask, str):
        if mask not in ds.variables:
            raise InputError(
                f"mask {mask!r} is not a variable of the Dataset; available: "
                f"{', '.join(map(str, ds.variables))}"
            )
        label, da = f"mask {mask!r}", ds[mask]
    elif isinstance(mask, xr.DataArray):
        label, da = "mask", mask
    else:
        raise TypeError(
            f"mask must be a boolean DataArray or a variable name, got {type(mask).__name__}"
        )
    extra = [str(d) for d in da.dims if d not in dims]
    if extra:
        raise InputError(
            f"{label} has dims {tuple(da.dims)}; it must lie on the variables' dims {tuple(dims)}"
        )
    if template is not None:
        try:
            xr.align(da, template, join="exact", copy=False)
        except ValueError as err:
            raise InputError(f"{label}'s coordinates do not match the Dataset's: {err}") from None
    for d in da.dims:
        if da.sizes[d] != sizes[str(d)]:
            raise InputError(
                f"{label} has {da.sizes[d]} elements along {d!r}, the Dataset {sizes[str(d)]}"
            )
    arr = np.asarray(da.values)
    if arr.dtype != bool:
        if not _is_numeric(arr.dtype):
            raise TypeError(f"{label} must be boolean, got dtype {arr.dtype}")
        if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
            raise InputError(f"{label} has NaN values; it must be True (inside) or False (outside)")
    return _expand(da.copy(data=arr != 0), dims, shape).copy()


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
        _warn(
            f"dim {d!r} has no coordinate variable: its integer positions 0..{ds.sizes[d] - 1} are "
            "used as its coordinate (give it one, e.g. ds.assign_coords, for real distances)"
        )
        out.append((d, "index"))
    return out


def _detect(ds: xr.Dataset, dims: Sequence[str]) -> list[tuple[str, str]]:
    found = [(n, coordinate_role(n, ds[n])) for n in _candidates(ds, dims)]
    chosen = [(n, r) for n, r in found if r is not None]
    roles = {r for _, r in chosen}
    if {"x", "y"} <= roles and {"lon", "lat"} & roles:
        chosen = [(n, r) for n, r in chosen if r not in ("lon", "lat")]
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
            + ": name them with coords=[...], e.g. coords=['x', 'y']"
        )
    return _cover_dims(ds, dims, chosen)


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
    """

    kind: str
    names: tuple[str, ...]
    scale: float = 1.0
    origin: str | None = None
    calendar: str | None = None

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
            "origin": self.origin,
            "calendar": self.calendar,
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
        """A short text, e.g. ``"x, y (km on the sphere from lon/lat), time (days since ...)"``."""
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
            parts.append(text + (f" x {a.scale:g}" if a.scale != 1.0 else ""))
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
        return np.datetime_as_string(valid.min().astype("datetime64[ns]"), unit="ns"), None
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
    return Axis(kind or "linear", (name,), scale)


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
    module docstring); the scales chosen are part of the geometry, so new locations are
    scaled the same way.

    Raises
    ------
    InputError
        ``coord_scale`` names an unused coordinate, or has a non-positive value.
    """
    if coord_scale is None:
        steps = grid_steps(ds, chosen)
        coord_scale = {} if steps is None else {n: 1.0 / v for n, v in steps.items() if v != 1.0}
    scales = _scales(coord_scale, chosen)
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
    import cftime  # noqa: PLC0415  (only for non-standard calendars)

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
            "model; "
            "every location needs finite coordinates: fix them, or leave those cells out with mask="
        )


def _raw(
    source: xr.Dataset | xr.DataArray,
    name: str,
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> np.ndarray:
    """One coordinate's values (or a dim's positions) at the flat ``index`` of ``shape``."""
    if name in source.coords or (isinstance(source, xr.Dataset) and name in source.variables):
        var = source[name]
    elif name in dims:
        var = xr.DataArray(np.arange(shape[list(dims).index(name)]), dims=(name,))
    else:
        raise InputError(f"coordinate {name!r} (used by the model) is missing")
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
        if np.any(np.abs(lat) > 90):
            raise InputError(
                f"latitude {axis.names[1]!r} has values outside [-90, 90] degrees "
                f"(min {lat.min():g}, max {lat.max():g})"
            )
        return sphere_positions(lon, lat) * axis.scale
    raw = _raw(source, axis.names[0], dims, shape, index)
    if axis.kind in ("time", "cftime", "duration"):
        col = _days(raw, axis)
    elif axis.kind == "index":
        col = raw.astype(np.float64)
    else:
        col = np.asarray(raw, dtype=np.float64)
    _check_finite(axis.names[0], col)
    return (col * axis.scale)[:, None]


def coordinates_at(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> np.ndarray:
    """``x`` at the flat ``index`` of the grid ``shape`` over ``dims``.

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


# --------------------------------------------------------------------------- fields
@dataclass
class Field:
    """A Dataset's variables as the arrays the engine takes.

    Attributes
    ----------
    names : list of str
        The K variables.
    dims : tuple of str
        Their dims, in the order of the first variable.
    shape : tuple of int
        Sizes of ``dims``.
    domain : ndarray of bool, shape ``shape``
        True inside the domain (the locations the engine sees).
    x : ndarray of float64, shape (N, D)
        Model coordinates of the N locations inside the domain, in C order over ``dims``.
    values : ndarray of float64, shape (N, K)
        The variables there, NaN where missing.
    transforms : dict of str to str or None
        ``"log"`` or None per variable.
    geometry : Geometry
    originals : dict of str to xarray.DataArray
        Each variable as in the input, in memory (for the exact copy of observed values).
    """

    names: list[str]
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    domain: np.ndarray
    x: np.ndarray
    values: np.ndarray
    transforms: dict[str, str | None]
    geometry: Geometry
    originals: dict[str, xr.DataArray] = field(repr=False, default_factory=dict)

    @property
    def log(self) -> np.ndarray:
        """Which variables are modelled in log space, shape (K,)."""
        return np.array([self.transforms.get(n) == "log" for n in self.names], dtype=bool)

    @property
    def index(self) -> np.ndarray:
        """Flat (C order) indices of the locations inside the domain, shape (N,)."""
        return np.flatnonzero(self.domain.reshape(-1))

    def fingerprint(self) -> str:
        """A hash of ``x`` and the observed values: equal for the same field."""
        h = hashlib.sha256()
        observed = ~np.isnan(self.values)
        for arr in (self.x, observed, np.where(observed, self.values, 0.0)):
            h.update(str(arr.shape).encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def unstack(self, columns: np.ndarray, j: int) -> xr.DataArray:
        """Column ``j`` of an (N, K) result on the grid of ``dims``, NaN outside the domain."""
        full = np.full(int(np.prod(self.shape)), np.nan)
        full[self.index] = columns[:, j]
        return xr.DataArray(full.reshape(self.shape), dims=self.dims)


def _stack_values(
    ds: xr.Dataset,
    names: Sequence[str],
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> tuple[np.ndarray, dict[str, xr.DataArray]]:
    values = np.empty((len(index), len(names)))
    originals = {}
    for j, name in enumerate(names):
        var = ds[name]
        if var.chunks is not None:
            var = var.compute()
        originals[name] = var
        values[:, j] = _take(var, dims, shape, index)
    return values, originals


def _check_values(
    values: np.ndarray, names: Sequence[str], transforms: Mapping[str, str | None], masked: bool
) -> None:
    where = " inside the mask" if masked else ""
    for j, name in enumerate(names):
        col = values[:, j]
        if np.isinf(col).any():
            raise InputError(
                f"variable {name!r} has {int(np.isinf(col).sum())} infinite values{where}; "
                "replace them with NaN (missing) or finite values"
            )
        observed = ~np.isnan(col)
        if not observed.any():
            raise InputError(
                f"variable {name!r} has no observed value{where}: there is nothing to learn "
                "it from; leave it out of vars"
            )
        if transforms.get(name) == "log":
            bad = observed & (col <= 0)
            if bad.any():
                raise InputError(
                    f"cannot log-transform {name!r}: {int(bad.sum())} observed values{where} are "
                    f"<= 0 (minimum {col[observed].min():g}); use no transform for it, or shift it "
                    "to positive values"
                )


def stack_field(
    ds: xr.Dataset,
    names: Sequence[str],
    geometry: Geometry,
    transforms: Mapping[str, str | None],
    mask: xr.DataArray | str | None = None,
) -> Field:
    """The :class:`Field` of ``names`` with a given geometry (e.g. one a model was trained with).

    Parameters
    ----------
    ds : xarray.Dataset
        Holds ``names`` on the same dims and the coordinates of ``geometry``.
    names : sequence of str
    geometry : Geometry
    transforms : mapping of str to str or None
    mask : DataArray or str, optional
        The domain (see :func:`domain_mask`).

    Returns
    -------
    Field

    Raises
    ------
    InputError
        Any of the input problems listed in :func:`prepare_field`.
    """
    missing = [n for n in names if n not in ds.data_vars]
    if missing:
        raise InputError(
            f"variables {missing} (used by the model) are not in the Dataset; "
            f"available: {', '.join(map(str, ds.data_vars))}"
        )
    names = list(names)
    select_variables(ds, names)
    dims = variable_dims(ds, names)
    shape = tuple(_sizes(ds)[d] for d in dims)
    domain = domain_mask(ds, mask, dims, template=ds[names[0]])
    index = np.flatnonzero(domain.reshape(-1))
    x = coordinates_at(ds, geometry, dims, shape, index)
    values, originals = _stack_values(ds, names, dims, shape, index)
    _check_values(values, names, transforms, masked=mask is not None)
    return Field(names, dims, shape, domain, x, values, dict(transforms), geometry, originals)


def prepare_field(
    ds: xr.Dataset,
    vars: str | Sequence[str] | None = None,
    *,
    coords: str | Sequence[str] | None = None,
    mask: xr.DataArray | str | None = None,
    transform: str | Mapping[str, str | None] | None = None,
    coord_scale: Mapping[str, float] | None = None,
) -> Field:
    """Choose the variables and coordinates of a Dataset and stack them for the engine.

    Parameters
    ----------
    ds : xarray.Dataset
        The data; not modified. Dask-backed variables are computed (only those needed).
    vars : str or sequence of str, optional
        Variables to impute (see :func:`select_variables`).
    coords : str or sequence of str, optional
        Coordinates forming ``x`` (see :func:`choose_coordinates`).
    mask : DataArray or str, optional
        The domain (see :func:`domain_mask`).
    transform : str or mapping, optional
        Per-variable transforms (see :func:`parse_transforms`).
    coord_scale : mapping of str to float, optional
        Multipliers of coordinates (see the module docstring).

    Returns
    -------
    Field
        ``x`` (N, D) and ``values`` (N, K) for the N locations inside the domain.

    Raises
    ------
    InputError
        An unknown variable, coordinate, transform or mask; variables on different dims; a
        variable with no observed value inside the domain; non-finite coordinates; a log
        transform of values <= 0; no coordinates for scattered data.
    TypeError
        A non-numeric variable or coordinate; ``ds`` not a Dataset.
    """
    if not isinstance(ds, xr.Dataset):
        hint = " (use da.to_dataset())" if isinstance(ds, xr.DataArray) else ""
        raise TypeError(f"expected an xarray.Dataset, got {type(ds).__name__}{hint}")
    exclude = [mask] if isinstance(mask, str) else []
    if coords is not None:
        exclude += [coords] if isinstance(coords, str) else [str(c) for c in coords]
    names = select_variables(ds, vars, exclude=exclude)
    if vars is not None and set(names) & set(exclude):
        clash = sorted(set(names) & set(exclude))
        raise InputError(f"{clash} cannot be both imputed and used as coordinates or mask")
    dims = variable_dims(ds, names)
    transforms = parse_transforms(transform, names)
    chosen = choose_coordinates(ds, dims, coords)
    geometry = build_geometry(ds, chosen, coord_scale)
    return stack_field(ds, names, geometry, transforms, mask)


# --------------------------------------------------------------------------- new locations
def _location_dims(source: xr.Dataset | xr.DataArray, geometry: Geometry) -> tuple[str, ...]:
    found: list[str] = []
    for name in geometry.names:
        if name in source.coords or (isinstance(source, xr.Dataset) and name in source.variables):
            dims = [str(d) for d in source[name].dims]
        elif name in source.dims:
            dims = [name]
        else:
            have = ", ".join(map(str, source.coords)) or "none"
            raise InputError(
                f"the locations lack coordinate {name!r}, which the model was trained on "
                f"(their coordinates: {have})"
            )
        found += [d for d in dims if d not in found]
    if isinstance(source, xr.DataArray):
        order = [str(d) for d in source.dims if str(d) in found]
        found = order + [d for d in found if d not in order]
    return tuple(found)


def locations(
    source: xr.Dataset | xr.DataArray, geometry: Geometry
) -> tuple[np.ndarray, tuple[str, ...], dict[str, Any]]:
    """Model coordinates of new locations, e.g. a grid or a list of sites.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
        Holds the coordinates of ``geometry`` (its values, if any, are ignored). Gridded: 1-D
        coordinates on their own dims, every combination is a location. Scattered:
        coordinates along one dim.
    geometry : Geometry
        The trained model's.

    Returns
    -------
    x : ndarray of float64, shape (M, D)
        In C order over ``dims``.
    dims : tuple of str
        Dims of the locations: those of a DataArray's in its order, else in the order the
        coordinates come in the geometry.
    coords : dict
        The coordinates of ``source`` that lie on ``dims`` (for the output).

    Raises
    ------
    InputError
        A coordinate is missing or not finite.
    """
    if not isinstance(source, (xr.Dataset, xr.DataArray)):
        raise TypeError(
            f"locations must be an xarray Dataset or DataArray, got {type(source).__name__}"
        )
    dims = _location_dims(source, geometry)
    sizes = _sizes(source)
    shape = tuple(sizes[d] for d in dims)
    x = coordinates_at(source, geometry, dims, shape, np.arange(int(np.prod(shape))))
    coords = {str(k): v for k, v in source.coords.items() if set(map(str, v.dims)) <= set(dims)}
    return x, dims, coords
