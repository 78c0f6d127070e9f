"""Geometry: how the chosen coordinates become the model's ``x`` (numbers, days, km on the Earth's sphere)."""

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
        Values, positions 0..n-1, days since ``origin``, days, or three km columns on the sphere.
    names : tuple of str
        The coordinate or dim; ``(lon, lat)`` for ``sphere``.
    scale : float
        Multiplier of the columns.
    origin, calendar, units : str, optional
        Time origin (ISO 8601) and calendar; ``units`` of a ``linear`` coordinate (checked later).
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
        """A short plain-ASCII text of the model's inputs, e.g.
        ``"x; y multiplied by 2; time as days since 2000-01-01"``."""
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
            parts.append(text + (f" multiplied by {a.scale:g}" if a.scale != 1.0 else ""))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (for saved models)."""
        return {"axes": [a.to_dict() for a in self.axes]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Geometry:
        """Rebuild from :meth:`to_dict` output.

        Parameters
        ----------
        data : mapping

        Returns
        -------
        Geometry
        """
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
    """The step of each chosen coordinate when they form a regular grid in plain numbers, else None.

    Parameters
    ----------
    ds : xarray.Dataset
    chosen : list of (name, role)

    Returns
    -------
    dict of str to float or None
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

    With ``coord_scale=None`` a regular grid in plain numbers (:func:`grid_steps`) is put in
    cell steps, so one cell counts the same along every axis; other data keep their units.

    Parameters
    ----------
    ds : xarray.Dataset
    chosen : list of (name, role)
        From :func:`~geogpvae.fields.coordinates.choose_coordinates`.
    coord_scale : mapping of str to float, optional
        Multipliers of named coordinates (lon/lat: the sphere, under either name); ``{}``: no scaling.

    Returns
    -------
    Geometry

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
        Default the Earth's mean radius in km.

    Returns
    -------
    ndarray, shape (N, 3)
    """
    lo, la = np.deg2rad(lon), np.deg2rad(lat)
    return radius * np.stack(
        [np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], axis=-1
    )
