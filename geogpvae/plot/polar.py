"""Maps of a polar cap: grids and sites all around a pole, such as sea-ice grids.

A polar stereographic map shows such data as they lie on the Earth, where PlateCarree would
squeeze them into a band along its top or bottom edge. Hemispheric grids that enclose the pole
(NSIDC's, reaching 31 N at the corners) get the same map (:func:`enclosed_pole`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .style import _corners

__all__ = ["HEMISPHERE_EDGE", "NEAR_POLE", "POLAR_EDGE", "beside_pole", "enclosed_pole", "polar_cap", "polar_centre", "polar_corners", "polar_extent", "polar_projection"]

#: data that go all around a pole and stay poleward of this latitude (degrees) form a cap
POLAR_EDGE = 40.0
#: a curvilinear grid that encloses a pole and stays poleward of this latitude (degrees) forms a cap too
HEMISPHERE_EDGE = 10.0
#: data poleward of :data:`POLAR_EDGE` that reach this latitude (degrees) lie beside the pole (:func:`beside_pole`)
NEAR_POLE = 80.0


def polar_cap(lon_span: float, lat0: float, lat1: float) -> str | None:
    """Which polar cap the data form, if any.

    Parameters
    ----------
    lon_span, lat0, lat1 : float
        The data's span of longitude, southernmost and northernmost latitude, in degrees.

    Returns
    -------
    {"north", "south"} or None
        A cap for 300 degrees of longitude or more, all poleward of :data:`POLAR_EDGE`.
    """
    if lon_span < 300:
        return None
    if lat0 >= POLAR_EDGE:
        return "north"
    if lat1 <= -POLAR_EDGE:
        return "south"
    return None


def beside_pole(lat0: float, lat1: float) -> str | None:
    """Which pole data reach, staying in its cap, without going all around it (regional sea-ice grids).

    Parameters
    ----------
    lat0, lat1 : float
        The data's southernmost and northernmost latitude, in degrees.

    Returns
    -------
    {"north", "south"} or None
        The pole for data all poleward of :data:`POLAR_EDGE` that reach :data:`NEAR_POLE`.
    """
    if lat0 >= POLAR_EDGE and lat1 >= NEAR_POLE:
        return "north"
    if lat1 <= -POLAR_EDGE and lat0 <= -NEAR_POLE:
        return "south"
    return None


def enclosed_pole(lon: Any, lat: Any) -> str | None:
    """Which pole a curvilinear grid encloses, lying wholly in that pole's hemisphere, if any.

    The grid's outer ring of points must wind once around the pole (its longitude steps, each within
    180 degrees, add up to a full turn) and stay poleward of :data:`HEMISPHERE_EDGE`.

    Parameters
    ----------
    lon, lat : array-like or None
        The grid's points, shape (ny, nx) with ny, nx >= 2, in degrees; anything else
        (None for sites, 1-D edges, non-finite points) gives None.

    Returns
    -------
    {"north", "south"} or None
    """
    if lon is None or lat is None or np.ndim(lon) != 2 or np.shape(lon) != np.shape(lat) or min(np.shape(lon)) < 2:
        return None
    h, v = np.asarray(lon, float), np.asarray(lat, float)
    if not (np.isfinite(h).all() and np.isfinite(v).all()):
        return None
    if v.min() > HEMISPHERE_EDGE:
        cap = "north"
    elif v.max() < -HEMISPHERE_EDGE:
        cap = "south"
    else:
        return None
    ring = np.concatenate([h[0, :], h[1:, -1], h[-1, -2::-1], h[-2::-1, 0]])  # closed: back to h[0, 0]
    turns = np.sum(np.mod(np.diff(ring) + 180.0, 360.0) - 180.0) / 360.0
    return cap if abs(round(turns)) == 1 else None


def polar_projection(ccrs: Any, cap: str, centre: float) -> Any:
    """cartopy's polar stereographic projection of ``cap``, centred on longitude ``centre``."""
    if cap == "north":
        return ccrs.NorthPolarStereo(central_longitude=centre)
    return ccrs.SouthPolarStereo(central_longitude=centre)


def polar_centre(ccrs: Any, cap: str, centre: float, lon: Any, lat: Any, rows_up: bool = True) -> float:
    """The central longitude of a polar map that follows a curvilinear grid's own orientation.

    The map is turned so the grid's rows run across it and its columns up it, the y axis up
    (a grid on the polar stereographic plane of longitude c gets c).

    Parameters
    ----------
    ccrs : module
        ``cartopy.crs``.
    cap : {"north", "south"}
        The polar cap (:func:`polar_cap`).
    centre : float
        The provisional central longitude, in degrees.
    lon, lat : array-like or None
        The grid's cell corners, shape (ny + 1, nx + 1), in degrees; anything else keeps ``centre``.
    rows_up : bool
        True where the grid's y grows with the row index; False where the first row is the top one.

    Returns
    -------
    float
        In degrees, in [-180, 180); ``centre`` where the grid's cell sides point every way.
    """
    if lon is None or lat is None or np.ndim(lon) != 2 or np.shape(lon) != np.shape(lat):
        return centre
    h, v = np.mod(np.asarray(lon, float) + 180.0, 360.0) - 180.0, np.asarray(lat, float)

    def sides(middle: float) -> tuple[np.ndarray, np.ndarray]:
        """The grid's cell sides on the map centred on ``middle``: along its columns, along its rows."""
        xy = polar_projection(ccrs, cap, middle).transform_points(ccrs.PlateCarree(), h, v)[..., :2]
        return np.diff(xy, axis=0).reshape(-1, 2), np.diff(xy, axis=1).reshape(-1, 2)

    dx, dy = np.concatenate(sides(centre)).T
    ok = np.isfinite(dx) & np.isfinite(dy)
    # four times each side's angle: sides a quarter turn apart point the same way
    length, quad = np.hypot(dx[ok], dy[ok]), 4.0 * np.arctan2(dy[ok], dx[ok])
    total = np.sum(length * np.exp(1j * quad))
    if not length.size or abs(total) < 0.5 * length.sum():
        return centre
    turn = np.degrees(np.angle(total)) / 4.0  # the sides' angle on the map, within 45 degrees
    aligned = centre + (turn if cap == "north" else -turn)

    def climb(middle: float) -> float:
        """How far the grid's rows, increasing, climb the map centred on ``middle`` (first and last rows)."""
        ends = polar_projection(ccrs, cap, middle).transform_points(ccrs.PlateCarree(), h[[0, -1]], v[[0, -1]])
        return float(np.nansum(ends[1, :, 1] - ends[0, :, 1]) * (1.0 if rows_up else -1.0))

    best = max((aligned + 90.0 * k for k in range(4)), key=climb)
    return float(np.mod(best + 180.0, 360.0) - 180.0)


def polar_extent(ccrs: Any, proj: Any, lon: Any, lat: Any, *, pad: float = 0.0) -> list[float]:
    """The extent of a polar map in ``proj``'s units: the box around the data as ``proj`` draws them.

    Given cell corners, every cell is held whole (a square sea-ice grid gets its own square).

    Parameters
    ----------
    ccrs : module
        ``cartopy.crs``.
    proj : cartopy CRS
        The polar projection (:func:`polar_projection`).
    lon, lat : array-like
        Points in degrees, broadcast together: cell corners (ny + 1, nx + 1) (or a regular grid's
        edges (1, nx + 1) and (ny + 1, 1)) or sites (n,). Non-finite points are left out.
    pad : float
        A margin on every side as a fraction of the box's longer side (for site markers); 0 for cells.

    Returns
    -------
    list of float
        ``[x0, x1, y0, y1]`` in metres, for ``ax.set_extent(..., crs=proj)``.

    Raises
    ------
    ValueError
        No point has a finite longitude and latitude.
    """
    h, v = (np.ravel(a) for a in np.broadcast_arrays(np.asarray(lon, float), np.asarray(lat, float)))
    keep = np.isfinite(h) & np.isfinite(v)
    if not keep.any():
        raise ValueError("polar_extent: no point with a finite longitude and latitude")
    # longitudes on one arc can run past 540 degrees, where cartopy gives inf: brought back
    xy = proj.transform_points(ccrs.PlateCarree(), np.mod(h[keep] + 180.0, 360.0) - 180.0, v[keep])
    x0, x1, y0, y1 = (float(f(xy[:, k])) for k in (0, 1) for f in (np.min, np.max))
    margin = pad * max(x1 - x0, y1 - y0)
    return [x0 - margin, x1 + margin, y0 - margin, y1 + margin]


def polar_corners(lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Cell corners of a curvilinear grid around a pole, averaged on the polar stereographic plane.

    Parameters
    ----------
    lon, lat : ndarray, shape (ny, nx)
        The cells' centres, in degrees; finite, the longitudes on one arc (within 180 degrees of a middle one).

    Returns
    -------
    (lon, lat) of shape (ny + 1, nx + 1), or None
        None unless the centres form a :func:`polar_cap`, enclose a pole (:func:`enclosed_pole`) or lie
        beside one (:func:`beside_pole`), with no step longer than a quarter of the cap's radius.
    """
    lat0, lat1 = float(np.min(lat)), float(np.max(lat))
    cap = polar_cap(float(np.ptp(lon)), lat0, lat1) or enclosed_pole(lon, lat) or beside_pole(lat0, lat1)
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
