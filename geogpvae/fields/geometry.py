"""Geometry: how the chosen coordinates become the model's ``x``.

Which coordinates are chosen: :mod:`~geogpvae.fields.coordinates`; their values at given
locations as the columns of ``x``: :mod:`~geogpvae.fields.positions`.

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
  cell counts the same along every axis (reservoir cells are often tens of times wider than
  thick: in metres a cell's nearest neighbours would all sit in its own column).
  ``coord_scale={}`` keeps the units of every coordinate, and ``coord_scale={"z": 5.0}``
  changes ``z`` only. Every other case (scattered data, time, lon/lat, uneven steps) keeps
  its units. The kernels learn one lengthscale per axis either way; the choice matters for
  which locations are neighbours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError
from .coordinates import _time_kind

__all__ = [
    "EARTH_RADIUS_KM",
    "Axis",
    "Geometry",
    "build_geometry",
    "grid_steps",
    "sphere_positions",
]

#: Mean radius of the Earth (IUGG), km: longitude/latitude become positions on this sphere.
EARTH_RADIUS_KM = 6371.0088


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
