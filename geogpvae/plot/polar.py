"""Maps of a polar cap: grids and sites all around a pole, such as sea-ice grids.

A polar stereographic sea-ice grid holds every longitude but only the latitudes poleward of
about 40 degrees. Drawn as a global PlateCarree map it would fill a thin band along the top
or the bottom edge; a polar stereographic map of the cap shows it as it lies on the Earth.
NSIDC's hemispheric grids reach 31 N (39 S) at their corners, but they enclose the pole and lie
wholly in its hemisphere: they get the same polar map (:func:`enclosed_pole`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .style import _corners

__all__ = ["HEMISPHERE_EDGE", "NEAR_POLE", "POLAR_EDGE", "beside_pole", "enclosed_pole", "polar_cap", "polar_centre", "polar_corners", "polar_extent", "polar_projection"]

#: data that go all around a pole and stay poleward of this latitude (degrees) form a cap
POLAR_EDGE = 40.0
#: a curvilinear grid that encloses a pole and stays poleward of this latitude (degrees) on the
#: pole's side of the equator forms a cap too
HEMISPHERE_EDGE = 10.0
#: data poleward of :data:`POLAR_EDGE` that reach this latitude (degrees) lie beside the pole: a
#: PlateCarree map would stretch them along its top or bottom edge (:func:`beside_pole`)
NEAR_POLE = 80.0


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


def beside_pole(lat0: float, lat1: float) -> str | None:
    """Which pole data reach, staying in its cap, without going all around it.

    A regional sea-ice grid whose edge passes a cell or a few from the pole spans 69-87 N over
    175 degrees of longitude: on a PlateCarree map it is a thin strip along the top edge. A polar
    stereographic map of its cap shows it as it lies.

    Parameters
    ----------
    lat0, lat1 : float
        The data's southernmost and northernmost latitude, in degrees.

    Returns
    -------
    {"north", "south"} or None
        ``"north"`` for data all north of :data:`POLAR_EDGE` that reach :data:`NEAR_POLE`;
        ``"south"`` for the same in the south; None otherwise.
    """
    if lat0 >= POLAR_EDGE and lat1 >= NEAR_POLE:
        return "north"
    if lat1 <= -POLAR_EDGE and lat0 <= -NEAR_POLE:
        return "south"
    return None


def enclosed_pole(lon: Any, lat: Any) -> str | None:
    """Which pole a curvilinear grid encloses, lying wholly in that pole's hemisphere, if any.

    NSIDC's hemispheric sea-ice grids (regular x/y grids on a polar stereographic plane) reach
    31 N (39 S) at their corners, so they do not stay poleward of :data:`POLAR_EDGE`, but the
    pole lies inside them. The outer ring of such a grid's points winds once around the pole:
    its longitudes, followed along the ring in steps taken within 180 degrees, add up to a full
    turn (the pole lies inside the grid's outline on a polar stereographic plane). The ring of
    a regional grid beside the pole, or of a longitude/latitude grid with its seam, does not
    wind. A grid that comes within :data:`HEMISPHERE_EDGE` of the equator or crosses it (a
    global or a tripolar ocean grid) is no cap either.

    Parameters
    ----------
    lon, lat : array-like or None
        The grid's points (cell centres or corners), shape (ny, nx) with ny, nx >= 2, in
        degrees; neighbours on the outer ring less than 180 degrees of longitude apart.
        Anything else (None for sites, the 1-D edges of a regular grid, non-finite points)
        gives None.

    Returns
    -------
    {"north", "south"} or None
        ``"north"`` for a grid whose ring winds once around the north pole, all north of
        :data:`HEMISPHERE_EDGE`; ``"south"`` for the same around the south pole, all south of
        ``-HEMISPHERE_EDGE``; None otherwise.
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

    A sea-ice grid is a regular x/y grid on a polar stereographic plane of its own (NSIDC's
    north is centred on -45 degrees). On a polar map centred on the middle of its corners'
    longitudes it comes out turned, and its box holds wedges of nothing at the corners. On
    a north polar stereographic map, moving the central longitude by d degrees turns the map
    by d degrees (by -d on a south one): the grid's cell sides are measured on the map
    centred on ``centre``, and the centre is moved by their angle, so that the grid's rows run
    across the map and its columns up it. Of the four central longitudes that do that, a
    quarter turn apart, the one that keeps the grid's y axis up is taken: its rows, in
    the direction ``rows_up`` gives, climb the map. A grid laid out on the plane of central
    longitude c, y increasing with the row, so gets the map centred on c (NSIDC's own picture).

    Parameters
    ----------
    ccrs : module
        ``cartopy.crs``.
    cap : {"north", "south"}
        The polar cap (:func:`polar_cap`).
    centre : float
        The provisional central longitude, in degrees.
    lon, lat : array-like or None
        The grid's cell corners, shape (ny + 1, nx + 1), in degrees. Anything else (None
        for sites, the 1-D edges of a regular longitude/latitude grid) keeps ``centre``.
    rows_up : bool
        True where the grid's y axis grows with the row index (row 0 at the bottom, as
        ``pcolormesh`` draws an array); False where it falls, as in files whose first row is
        the top one (a 1-D ``y`` coordinate that decreases).

    Returns
    -------
    float
        The central longitude in degrees, in [-180, 180). ``centre`` itself where the grid has
        no orientation of its own on the map: where its cell sides, taken modulo a quarter
        turn, point every way, as those of a 2-D longitude/latitude grid around the pole do.
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
        """How far the grid's rows, in their increasing direction, climb the map centred on ``middle``:
        the steps along its columns add up to its last row of corners less its first, so only
        those two rows are projected."""
        ends = polar_projection(ccrs, cap, middle).transform_points(ccrs.PlateCarree(), h[[0, -1]], v[[0, -1]])
        return float(np.nansum(ends[1, :, 1] - ends[0, :, 1]) * (1.0 if rows_up else -1.0))

    best = max((aligned + 90.0 * k for k in range(4)), key=climb)
    return float(np.mod(best + 180.0, 360.0) - 180.0)


def polar_extent(ccrs: Any, proj: Any, lon: Any, lat: Any, *, pad: float = 0.0) -> list[float]:
    """The extent of a polar map, in ``proj``'s own units: the box around the data drawn on it.

    The box holds the data's points as ``proj`` places them and no more, so that the data fill
    the map. Given a grid's cell corners, it holds every cell whole: cells are drawn as
    quadrilaterals between their corners, straight in the plane of the map. A square sea-ice
    grid (polar stereographic, 25 km cells) gets its own square, not the square around the
    disc that reaches its lowest latitude, whose corners would be left empty. The disc's square
    comes out only where it is right: where the data go all around the pole out to one
    latitude, as a regular longitude/latitude grid does from the cap's edge to the pole.

    Parameters
    ----------
    ccrs : module
        ``cartopy.crs``.
    proj : cartopy CRS
        The polar projection (:func:`polar_projection`).
    lon, lat : array-like
        Longitudes and latitudes of the points, in degrees, broadcast against each other: the
        corners of a grid's cells, shape (ny + 1, nx + 1) (or (1, nx + 1) and (ny + 1, 1) for
        a regular grid's edges), or sites, shape (n,). Non-finite points are left out.
    pad : float
        A margin on every side, as a fraction of the box's longer side (for the markers of
        sites, which stand out of their points); 0 for cells.

    Returns
    -------
    list of float
        ``[x0, x1, y0, y1]`` in the projection's units (metres) for
        ``ax.set_extent(..., crs=proj)``.

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
        None where the centres neither form a :func:`polar_cap`, enclose a pole
        (:func:`enclosed_pole`) nor lie beside one (:func:`beside_pole`), or are not a grid in that plane (a step between neighbouring cells longer than a quarter of the cap's radius).
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
