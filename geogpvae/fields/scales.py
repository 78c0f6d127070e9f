"""How the coordinates of ``x`` compare in scale: a unitless axis beside kilometres.

Longitude/latitude become positions in km on a sphere (:mod:`geogpvae.fields.geometry`), and a
coordinate with length units keeps its units: depth in metres counts one metre as one km, which
leaves the levels far apart and the neighbours lateral. A coordinate *without* length units (an
ocean s-coordinate in [-1, 0], model level numbers, a dim without a coordinate) has no scale
that could be set against kilometres; its steps are often much shorter than the distance between
neighbouring places, and then every location's nearest neighbours are the levels of its own
column. Where those levels differ, gaps are filled from the level next to them (the scale the
warning names fixes that: docs/performance.md). :func:`unitless_axes` finds such coordinates and
that scale; the default does not apply it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .geometry import Geometry

__all__ = ["NO_LENGTH_UNITS", "VERTICAL_NAMES", "looks_vertical", "unitless_axes", "unitless_axes_warning"]

#: ``units`` attributes (lower case) that say a coordinate is a count or a ratio, not a length
NO_LENGTH_UNITS = frozenset({"", "1", "-", "none", "nondimensional", "dimensionless", "level", "levels",
                             "layer", "layers", "sigma", "sigma_level", "model_level_number"})

#: a unitless step below this share of the distance between places is warned about
STEP_SHARE = 0.1

#: names of vertical dims and coordinates (lower case); ``s_...`` (ROMS ``s_rho``, ``s_w``) too
VERTICAL_NAMES = frozenset({"z", "depth", "layer", "level", "levels", "lev", "sigma", "k", "nz"})


def looks_vertical(name: str, coord: xr.DataArray | None = None) -> bool:
    """Whether the dim or coordinate ``name`` is vertical.

    Maps (``geogpvae plot``) and the unitless-level check share it.

    Parameters
    ----------
    name : str
        The dim or coordinate; its name alone counts when it is one of :data:`VERTICAL_NAMES`
        or starts with ``s_`` (ROMS ``s_rho``, ``s_w``).
    coord : xarray.DataArray, optional
        Its coordinate, for the CF attributes: ``axis="Z"``, ``positive``, or a depth, height,
        sigma, s-coordinate or level ``standard_name``.

    Returns
    -------
    bool
    """
    attrs = {} if coord is None else coord.attrs
    standard = str(attrs.get("standard_name", "")).lower()
    return (name.lower() in VERTICAL_NAMES or name.lower().startswith("s_") or "positive" in attrs
            or str(attrs.get("axis", "")).upper() == "Z"
            or any(w in standard for w in ("depth", "height", "altitude", "_s_coordinate", "sigma", "level")))


def _spacing(columns: np.ndarray, max_places: int = 20000, seed: int = 0) -> float:
    """The median distance (km) from a place on the sphere to the nearest other place."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    places = np.unique(columns, axis=0)  # every distinct place: a sample would lie farther apart
    if len(places) < 2:
        return float("nan")
    query = places if len(places) <= max_places else places[rng.choice(len(places), max_places, replace=False)]
    dist, _ = cKDTree(places).query(query, k=2)
    return float(np.median(dist[:, 1]))


def unitless_axes(geometry: Geometry, x: np.ndarray, skip: frozenset[str] = frozenset()) -> list[tuple[str, float, float]]:
    """Coordinates without length units whose step is short against the places on the sphere.

    Parameters
    ----------
    geometry : Geometry
        The coordinates of ``x``; only a geometry with a longitude/latitude sphere is looked at.
    x : ndarray, shape (N, D)
        The locations, as :func:`~geogpvae.fields.positions.coordinates_at` made them (scaled).
    skip : set of str
        Coordinates not to look at: in :func:`~geogpvae.fields.stacking.prepare_field`, those that
        do not look vertical (:func:`looks_vertical`), those ``coord_scale`` names and numbers
        marked as time (months since a date).

    Returns
    -------
    list of (str, float, float)
        For each such coordinate: its name, its median step in ``x`` and the median distance
        in km between neighbouring places on the sphere (the step is below :data:`STEP_SHARE`
        of it).
    """
    starts = np.cumsum([0] + [a.width for a in geometry.axes])
    sphere = [i for i, a in enumerate(geometry.axes) if a.kind == "sphere"]
    if not sphere or len(x) < 2:
        return []
    spacing = None
    found = []
    for i, axis in enumerate(geometry.axes):
        unitless = axis.kind == "index" or (
            axis.kind == "linear" and (axis.units or "").strip().lower() in NO_LENGTH_UNITS)
        if not unitless or axis.names[0] in skip:
            continue
        levels = np.unique(x[:, starts[i]])
        if levels.size < 2:
            continue
        step = float(np.median(np.diff(levels)))
        if spacing is None:
            s = starts[sphere[0]]
            spacing = _spacing(x[:, s : s + 3])
        if np.isfinite(spacing) and step < STEP_SHARE * spacing:
            found.append((axis.names[0], step, spacing))
    return found


def unitless_axes_warning(found: list[tuple[str, float, float]]) -> str:
    """The text of the warning about :func:`unitless_axes`' coordinates, with the scales to give.

    Parameters
    ----------
    found : list of (str, float, float)
        :func:`unitless_axes`' result (not empty): name, median step, spacing of places in km.

    Returns
    -------
    str
        The warning, naming each coordinate's ``coord_scale`` (spacing / step) and the command
        line's ``--option coord_scale.NAME=...``.
    """
    parts = [f"{name} (step {step:.3g}, counted as {step:.3g} km)" for name, step, _ in found]
    spacing = found[0][2]
    scales = ", ".join(f"{name!r}: {spacing / step:.3g}" for name, step, _ in found)
    options = " ".join(f"--option coord_scale.{name}={spacing / step:.3g}" for name, step, _ in found)
    return (
        f"{', '.join(parts)} {'has no length units and sits' if len(found) == 1 else 'have no length units and sit'} beside "
        f"longitude/latitude in km, where neighbouring places lie {spacing:.3g} km apart: each location's "
        "nearest neighbours are then the cells along it at the same place (the levels of its column), and "
        f"a gap is filled from the cells next to it there. If those differ, scale it: coord_scale={{{scales}}} "
        f"(on the command line {options}) makes one step as far as one place"
    )
