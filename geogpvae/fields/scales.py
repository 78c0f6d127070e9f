"""Whether a unitless axis (level numbers) beside lon/lat in km leaves neighbours in one column."""

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

    Parameters
    ----------
    name : str
        One of :data:`VERTICAL_NAMES` or ``s_...`` is vertical.
    coord : xarray.DataArray, optional
        For its CF ``axis``, ``positive`` or ``standard_name``.

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
    x : ndarray, shape (N, D)
    skip : set of str
        Coordinates not to look at.

    Returns
    -------
    list of (str, float, float)
        Name, median step, and the median km between places (over 1 / :data:`STEP_SHARE` steps).
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

    Returns
    -------
    str
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
