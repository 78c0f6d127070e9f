"""Maps of a polar cap: grids and sites all around a pole, such as sea-ice grids.

A polar stereographic sea-ice grid holds every longitude but only the latitudes poleward of
about 40 degrees. Drawn as a global PlateCarree map it would fill a thin band along the top
or the bottom edge; a polar stereographic map of the cap shows it as it lies on the Earth.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .style import _corners

__all__ = ["POLAR_EDGE", "polar_cap", "polar_corners", "polar_extent", "polar_projection"]

#: data that go all around a pole and stay poleward of this latitude (degrees) form a cap
POLAR_EDGE = 40.0


def polar_cap(lon_span: float, lat0: float, lat1: float) -> str | None:
    """Which polar cap the data form, if any.

    Parameters
    ----------
    lon_span : float
        The data's span of longitude, in degrees.
    lat0, lat1 : float
        Their southernmost and northernmost latitude, in degrees.

    Returns
    -------
    {"north", "south"} or None
        ``"north"`` for data spanning 300 degrees of longitude or more, all north of
        :data:`POLAR_EDGE`; ``"south"`` for the same south of ``-POLAR_EDGE``; None otherwise.
    """
    if lon_span < 300:
        return None
    if lat0 >= POLAR_EDGE:
        return "north"
    if lat1 <= -POLAR_EDGE:
        return "south"
    return None


def polar_projection(ccrs: Any, cap: str, centre: float) -> Any:
    """cartopy's polar stereographic projection of ``cap``, centred on longitude ``centre``."""
    if cap == "north":
        return ccrs.NorthPolarStereo(central_longitude=centre)
    return ccrs.SouthPolarStereo(central_longitude=centre)


def polar_extent(ccrs: Any, proj: Any, cap: str, lat0: float, lat1: float) -> list[float]:
    """The map extent in ``proj``'s own units: the disc from the cap's edge to the pole.

    Parameters
    ----------
    ccrs : module
        ``cartopy.crs``.
    proj : cartopy CRS
        The polar projection (:func:`polar_projection`).
    cap : {"north", "south"}
    lat0, lat1 : float
        The data's southernmost and northernmost latitude, in degrees.

    Returns
    -------
    list of float
        ``[x0, x1, y0, y1]`` for ``ax.set_extent(..., crs=proj)``.
    """
    lon = np.linspace(-180.0, 180.0, 73)
    edge = np.full(lon.shape, lat0 if cap == "north" else lat1)
    xy = proj.transform_points(ccrs.PlateCarree(), lon, edge)
    return [float(xy[:, 0].min()), float(xy[:, 0].max()), float(xy[:, 1].min()), float(xy[:, 1].max())]


def polar_corners(lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Cell corners of a curvilinear grid around a pole, taken where the grid is smooth.

    Around a pole, neighbouring cells can lie on opposite sides of the dateline or of the pole
    itself, so corners averaged from their longitudes and latitudes are wrong. A polar
    stereographic plane holds such a grid as it lies: the corners are averaged there, as for
    any curvilinear grid, and turned back into longitude and latitude.

    Parameters
    ----------
    lon, lat : ndarray, shape (ny, nx)
        The cells' centres, in degrees; finite, the longitudes on one arc (within 180 degrees
        of a middle one, as :func:`~geogpvae.plot.curvilinear._mesh_centres` gives them).

    Returns
    -------
    (lon, lat) of shape (ny + 1, nx + 1), or None
        None where the centres do not form a :func:`polar_cap` or are not a grid in that
        plane (a step between neighbouring cells longer than a quarter of the cap's radius).
    """
    cap = polar_cap(float(np.ptp(lon)), float(np.min(lat)), float(np.max(lat)))
    if cap is None or min(lon.shape) < 2:
        return None
    sign = 1.0 if cap == "north" else -1.0
    rho = np.tan(np.radians(90.0 - sign * lat) / 2.0)  # distance from the pole on the plane
    x, y = rho * np.sin(np.radians(lon)), -sign * rho * np.cos(np.radians(lon))
    steps = max(max(np.abs(np.diff(c, axis=a)).max() for a in (0, 1)) for c in (x, y))
    if steps > 0.25 * rho.max():
        return None
    cx, cy = _corners(x), _corners(y)
    corner_lon = np.degrees(np.arctan2(cx, -sign * cy))
    corner_lat = sign * (90.0 - 2.0 * np.degrees(np.arctan(np.hypot(cx, cy))))
    return corner_lon, corner_lat
