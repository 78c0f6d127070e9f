"""Maps of a polar cap: grids and sites all around a pole, such as sea-ice grids.

A polar stereographic sea-ice grid holds every longitude but only the latitudes poleward of
about 40 degrees. Drawn as a global PlateCarree map it would fill a thin band along the top
or the bottom edge; a polar stereographic map of the cap shows it as it lies on the Earth.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["POLAR_EDGE", "polar_cap", "polar_extent", "polar_projection"]

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
