"""Polar maps (geogpvae/plot/polar.py): which pole a grid encloses or lies beside, and how its
polar map is turned and framed."""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr
from figure_helpers import _curvilinear, _drawn, mesh, panels
from matplotlib.collections import PathCollection, QuadMesh

from geogpvae import plot
from geogpvae.plot.polar import HEMISPHERE_EDGE, enclosed_pole, polar_centre


def _plane_grid(reach: float, cap: str = "north", central_longitude: float = -45.0):
    """Cell corners of a square x/y grid on a polar stereographic plane, centred on the pole,
    its corners reaching down to latitude ``reach`` (degrees from the equator)."""
    ccrs = pytest.importorskip("cartopy.crs")
    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    plane = polar(central_longitude=central_longitude)
    sign = 1.0 if cap == "north" else -1.0
    corner = plane.transform_point(central_longitude + 45.0, sign * reach, ccrs.PlateCarree())
    half = np.hypot(*corner) / np.sqrt(2.0)
    x, y = np.meshgrid(np.linspace(-half, half, 9), np.linspace(-half, half, 9))
    lonlat = ccrs.PlateCarree().transform_points(plane, x, y)
    return lonlat[..., 0], lonlat[..., 1]


@pytest.mark.parametrize("cap", ["north", "south"])
def test_a_grid_around_a_pole_is_a_cap_only_while_it_keeps_away_from_the_equator(cap):
    # NSIDC's grids reach 31 N (39 S) at their corners and are caps; one reaching within
    # HEMISPHERE_EDGE degrees of the equator is not, even with the pole inside it
    lon, lat = _plane_grid(HEMISPHERE_EDGE + 5.0, cap)
    assert np.abs(lat).min() == pytest.approx(HEMISPHERE_EDGE + 5.0, abs=0.01)
    assert enclosed_pole(lon, lat) == cap
    lon, lat = _plane_grid(HEMISPHERE_EDGE - 5.0, cap)
    assert enclosed_pole(lon, lat) is None


def test_a_lon_lat_grid_around_the_pole_keeps_the_provisional_centre():
    # the cells of a 2-D longitude/latitude grid around the pole point every way on the map:
    # no orientation of its own, so the map keeps its centre; a sea-ice grid gets its plane's
    ccrs = pytest.importorskip("cartopy.crs")
    lon, lat = np.meshgrid(np.arange(-180.0, 180.1, 10.0), np.arange(60.0, 90.1, 3.0))
    assert polar_centre(ccrs, "north", 17.0, lon, lat) == 17.0
    assert polar_centre(ccrs, "north", 17.0, None, None) == 17.0
    lon, lat = _plane_grid(35.0, "north", central_longitude=-45.0)
    assert polar_centre(ccrs, "north", 17.0, lon, lat) == pytest.approx(-45.0, abs=0.2)


@pytest.mark.parametrize("cap", ["north", "south"])
def test_field_map_sea_ice_grid_around_a_pole_gets_a_polar_map(cap):
    # a polar stereographic sea-ice grid: every longitude, latitudes poleward of 60; on the
    # global PlateCarree map it filled a thin band along the edge, now the cap fills the panel
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    yx = (np.arange(12) - 5.5) * 100.0
    x, y = np.meshgrid(yx, yx)
    lat = (90.0 - np.hypot(x, y) / 111.0) * (1 if cap == "north" else -1)
    ds, _ = _curvilinear(np.degrees(np.arctan2(x, -y)), lat)
    fig, axs = _drawn(ds)
    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    assert all(isinstance(ax.projection, polar) for ax in axs)
    x0, x1, y0, y1 = axs[0].get_extent(crs=axs[0].projection)
    drawn = axs[0].projection.transform_points(ccrs.PlateCarree(), ds.lon.values.ravel(), lat.ravel())
    span = np.ptp(drawn[:, :2], axis=0)
    assert x0 <= drawn[:, 0].min() and drawn[:, 0].max() <= x1 and y0 <= drawn[:, 1].min() <= y1
    assert span[0] > 0.5 * (x1 - x0) and span[1] > 0.5 * (y1 - y0)  # the data fill the map
    # drawn as cells, not as 144 markers: corners taken in the polar plane, so the cells
    # around the pole close on it and tile the cap without overlaps or gaps
    mesh = next(c for c in axs[0].collections if isinstance(c, QuadMesh) and c.get_gid() == "imputed")
    corners = mesh.get_coordinates()
    assert corners.shape == (13, 13, 2)
    plane = axs[0].projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    px, py = plane[:, 0].reshape(13, 13), plane[:, 1].reshape(13, 13)
    np.testing.assert_allclose(np.hypot(px[6, 6], py[6, 6]), 0.0, atol=1.0)  # the middle corner on the pole
    area = 0.5 * np.abs((px[1:, 1:] - px[:-1, :-1]) * (py[1:, :-1] - py[:-1, 1:])
                        - (px[1:, :-1] - px[:-1, 1:]) * (py[1:, 1:] - py[:-1, :-1]))
    assert area.max() < 1.5 * area.min()  # equal cells, none folded across the pole or the dateline
    assert not any(c.get_gid() == "observed" for c in axs[0].collections)  # no site markers
    fig.canvas.draw()
    # the latitude labels on the frame, not over the data in the middle of the map
    box = axs[0].get_window_extent()
    gridliners = [a for a in [*axs[0].artists, *getattr(axs[0], "_gridliners", [])] if hasattr(a, "label_artists")]
    labels = [t for gl in gridliners for t in gl.label_artists if t.get_visible() and t.get_text()]
    assert labels
    for t in labels:
        where = t.get_window_extent()
        assert not box.shrunk(0.8, 0.8).anchored("C", box).overlaps(where), t.get_text()
        assert t.get_rotation() == 0, t.get_text()  # read without turning the head


def _polar_case(case):
    """A field around the north pole, and the lon/lat of the corners of its cells (or its
    sites), worked out here: a sea-ice grid of 100 km cells laid out on the polar
    stereographic plane, a regular lon/lat grid from 60 N to the pole, or 40 stations."""
    import cartopy.crs as ccrs

    rng = np.random.default_rng(3)
    if case == "sites":  # all around but 130..100 W: maps put them on one arc, at 260..590 E
        lon, lat = np.mod(np.linspace(80.0, 410.0, 40), 360.0) - 180.0, rng.uniform(66.0, 88.0, 40)
        ds = xr.Dataset({"v": ("station", rng.normal(size=40)),
                         "v_std": ("station", np.where(np.arange(40) % 3 == 0, 0.2, 0.0))},
                        coords={"lon": ("station", lon), "lat": ("station", lat)})
        return ds, lon, lat
    if case == "lon/lat grid":  # 10 x 3 degree cells; edges at -180..180 and 60..90
        lon, lat = np.arange(-175.0, 180.0, 10.0), np.arange(61.5, 90.0, 3.0)
        ds = xr.Dataset({"v": (("lat", "lon"), rng.normal(size=(lat.size, lon.size)))},
                        coords={"lon": lon, "lat": lat})
        edges = np.meshgrid(np.arange(-180.0, 181.0, 10.0), np.arange(60.0, 91.0, 3.0))
        return ds, edges[0], edges[1]
    plane = ccrs.NorthPolarStereo()
    step = 100e3
    x, y = np.meshgrid((np.arange(12) - 5.5) * step, (np.arange(10) - 4.5) * step + 300e3)
    cx, cy = np.meshgrid((np.arange(13) - 6.0) * step, (np.arange(11) - 5.0) * step + 300e3)
    centres, corners = (ccrs.PlateCarree().transform_points(plane, a, b) for a, b in ((x, y), (cx, cy)))
    ds, _ = _curvilinear(centres[..., 0], centres[..., 1])
    return ds, corners[..., 0], corners[..., 1]


@pytest.mark.parametrize("case", ["sea-ice grid", "lon/lat grid", "sites"])
def test_polar_map_is_framed_by_its_data(case):
    # a polar map's extent is the box around the data as projected, every cell whole: a square
    # sea-ice grid fills its panel (the square around the disc down to its lowest latitude
    # left its corners empty); a lon/lat grid out to 60 N fills that disc; sites keep a margin
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    ds, lon, lat = _polar_case(case)
    fig, axs = _drawn(ds)
    fig.canvas.draw()
    ax = axs[0]
    assert isinstance(ax.projection, ccrs.NorthPolarStereo)
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    xy = ax.projection.transform_points(ccrs.PlateCarree(), np.ravel(lon), np.ravel(lat))
    bx0, bx1, by0, by1 = xy[:, 0].min(), xy[:, 0].max(), xy[:, 1].min(), xy[:, 1].max()
    side = max(bx1 - bx0, by1 - by0)
    margin = 0.05 * side if case == "sites" else 0.0  # room for the markers
    np.testing.assert_allclose([x0, x1, y0, y1], [bx0 - margin, bx1 + margin, by0 - margin, by1 + margin],
                               atol=2e-3 * side)
    if case == "sites":
        h, v = np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]).T
        assert h.size == 40
        drawn = ax.projection.transform_points(ccrs.PlateCarree(), np.mod(h + 180.0, 360.0) - 180.0, v)
    else:  # every corner of every cell drawn lies inside the map
        corners = mesh(ax).get_coordinates()
        drawn = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    tol = 1e-6 * side
    assert (drawn[:, 0] >= x0 - tol).all() and (drawn[:, 0] <= x1 + tol).all()
    assert (drawn[:, 1] >= y0 - tol).all() and (drawn[:, 1] <= y1 + tol).all()
    if case == "sea-ice grid":  # and reach its frame on all four sides
        for edge, got in ((x0, drawn[:, 0].min()), (x1, drawn[:, 0].max()), (y0, drawn[:, 1].min()),
                          (y1, drawn[:, 1].max())):
            assert abs(got - edge) < 1e-6 * side


def _stereographic_grid(cap, central_longitude):
    """An NSIDC-like sea-ice grid, its 2-D lon/lat worked out here: 14 x 11 cells of 500 km on
    a regular x/y grid of the polar stereographic plane with ``central_longitude`` (degrees),
    true scale at 70 degrees, off-centre on the pole as NSIDC's grids are; and that plane."""
    import cartopy.crs as ccrs

    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    plane = polar(central_longitude=central_longitude, true_scale_latitude=70.0 if cap == "north" else -70.0)
    x, y = np.meshgrid((np.arange(14) - 6.5) * 500e3 - 100e3, (np.arange(11) - 5.0) * 500e3 + 200e3)
    lonlat = ccrs.PlateCarree().transform_points(plane, x, y)
    return lonlat[..., 0], lonlat[..., 1], plane


@pytest.mark.parametrize(("cap", "central_longitude"), [("north", -45.0), ("north", 30.0), ("south", 30.0)])
def test_polar_map_of_a_sea_ice_grid_follows_the_grid_s_orientation(cap, central_longitude):
    # a sea-ice grid laid out on a polar stereographic plane centred on -45 degrees (NSIDC's
    # north) gets a map centred on -45 degrees, not on the middle of its corners' longitudes,
    # which turned it on the map, nor on 45, 135 or -135 (a quarter turn also lays its rows
    # across the map, but not its y axis up): its rows run across the map, its columns up it,
    # and it fills its box without wedges
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    lon, lat, plane = _stereographic_grid(cap, central_longitude)
    ds, _ = _curvilinear(lon, lat)
    fig, axs = _drawn(ds)
    ax = axs[0]
    assert isinstance(ax.projection, type(plane))
    chosen = ax.projection.proj4_params["lon_0"]
    assert abs(np.mod(chosen - central_longitude + 180.0, 360.0) - 180.0) < 0.2, chosen
    corners = mesh(ax).get_coordinates()
    drawn = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    px, py = drawn[:, 0].reshape(corners.shape[:2]), drawn[:, 1].reshape(corners.shape[:2])
    # along a row or along a column: one of them across the map, the other up it
    row, col = (np.degrees(np.arctan2(np.diff(py, axis=a), np.diff(px, axis=a))) for a in (1, 0))
    for angle in (row, col):
        np.testing.assert_allclose(np.mod(angle + 45.0, 90.0) - 45.0, 0.0, atol=0.5)
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    outer = np.ptp(px) * np.ptp(py)
    grid = _ring_area(px, py)
    assert grid > 0.99 * outer and outer > 0.99 * (x1 - x0) * (y1 - y0)  # the grid fills its box
    fig.canvas.draw()


@pytest.mark.parametrize("cap", ["north", "south"])
def test_a_polar_map_keeps_a_grid_s_y_axis_up_whichever_row_comes_first(cap):
    # the same sea-ice grid written top row first, as NSIDC writes its files (a falling y
    # coordinate), is drawn as NSIDC draws it too; without a y coordinate, the first row is the
    # bottom one (as pcolormesh draws an array), so the top-first grid turns half a turn
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    lon, lat, _ = _stereographic_grid(cap, -45.0)
    y = (np.arange(lon.shape[0]) - 5.0) * 500e3 + 200e3  # the rows' y on the plane, rising
    centres = {}
    for case, flip, coord in (("bottom first", False, True), ("top first", True, True),
                              ("top first, no y", True, False)):
        ds, _ = _curvilinear(lon[::-1] if flip else lon, lat[::-1] if flip else lat)
        if coord:
            ds = ds.assign_coords(y=y[::-1] if flip else y)
        fig, axs = _drawn(ds)
        centres[case] = axs[0].projection.proj4_params["lon_0"]
        corners = mesh(axs[0]).get_coordinates()
        drawn = axs[0].projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
        rows_y = drawn[:, 1].reshape(corners.shape[:2]).mean(axis=1)
        assert (np.diff(rows_y) > 0).all() == (case != "top first"), case  # y up: the top row drawn at the top
        plt.close(fig)
    assert abs(centres["bottom first"] + 45.0) < 0.2 and abs(centres["top first"] + 45.0) < 0.2, centres
    assert abs(np.mod(centres["top first, no y"] - 135.0 + 180.0, 360.0) - 180.0) < 0.2, centres


def _ring_area(px, py):
    """The area enclosed by the outer ring of a grid of corners (shoelace formula)."""
    rx = np.concatenate([px[0, :], px[1:, -1], px[-1, -2::-1], px[-2:0:-1, 0]])
    ry = np.concatenate([py[0, :], py[1:, -1], py[-1, -2::-1], py[-2:0:-1, 0]])
    return 0.5 * abs(np.sum(rx * np.roll(ry, -1) - np.roll(rx, -1) * ry))


#: NSIDC's hemispheric polar stereographic grids (25 km cells): the central longitude (degrees)
#: and the x and y of the outer cell edges (km)
_NSIDC = {"north": (-45.0, (-3850.0, 3750.0), (-5350.0, 5850.0)),
          "south": (0.0, (-3950.0, 3950.0), (-3950.0, 4350.0))}


def _nsidc_grid(cap, *, shift=(0.0, 0.0), scale=1.0):
    """An NSIDC hemispheric sea-ice grid downsampled to 100 km cells (``scale`` times that), its
    2-D lon/lat worked out here with cartopy: the centres and the corners of its cells, the
    outer edges moved by ``shift`` (km) on the plane; and that plane (true scale at 70 degrees)."""
    import cartopy.crs as ccrs

    central_longitude, (x0, x1), (y0, y1) = _NSIDC[cap]
    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    plane = polar(central_longitude=central_longitude, true_scale_latitude=70.0 if cap == "north" else -70.0)
    cx = (np.arange(x0, x1 + 1.0, 100.0) + shift[0]) * 1e3 * scale
    cy = (np.arange(y0, y1 + 1.0, 100.0) + shift[1]) * 1e3 * scale
    x, y = np.meshgrid(0.5 * (cx[1:] + cx[:-1]), 0.5 * (cy[1:] + cy[:-1]))
    centres, corners = (ccrs.PlateCarree().transform_points(plane, a, b) for a, b in ((x, y), np.meshgrid(cx, cy)))
    return centres[..., :2], corners[..., :2], plane


@pytest.mark.parametrize("cap", ["north", "south"])
def test_polar_map_of_an_nsidc_hemispheric_grid(cap):
    # NSIDC's hemispheric sea-ice grids enclose the pole but reach 31 N (39 S) at their corners,
    # not poleward of 40: they were drawn as points on a global PlateCarree map. A grid that
    # encloses a pole and lies wholly in its hemisphere gets the polar map, framed by the box
    # around its cells and turned to its rows
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    centres, corners, plane = _nsidc_grid(cap)
    assert np.abs(corners[..., 1]).min() < 40.0  # not a cap poleward of 40
    ds, _ = _curvilinear(centres[..., 0], centres[..., 1])
    fig, axs = _drawn(ds)
    ax = axs[0]
    assert all(isinstance(a.projection, type(plane)) for a in axs)
    chosen = ax.projection.proj4_params["lon_0"]
    assert abs(np.mod(chosen - _NSIDC[cap][0] + 180.0, 360.0) - 180.0) < 0.2, chosen  # NSIDC's own picture
    # drawn as its cells, and the frame is the box around them on the map
    drawn = mesh(ax).get_coordinates()
    assert drawn.shape == (*corners.shape[:2], 2)
    xy = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    side = max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1]))
    np.testing.assert_allclose([x0, x1, y0, y1], [xy[:, 0].min(), xy[:, 0].max(), xy[:, 1].min(), xy[:, 1].max()],
                               atol=2e-3 * side)
    fig.canvas.draw()


@pytest.mark.parametrize("case", ["pole outside", "across the equator"])
def test_a_grid_that_does_not_enclose_a_pole_in_its_hemisphere_keeps_its_map(case):
    # the same grid moved 4000 km along x (the pole 150 km outside its west edge), or with cells
    # twice as long (enclosing the pole, but reaching 7 S): no polar map, drawn as before, as
    # cells on a PlateCarree map centred on them, or as points on a global one
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    moved = case == "pole outside"
    centres, corners, _ = _nsidc_grid("north", shift=(4000.0, 0.0) if moved else (0.0, 0.0), scale=1.0 if moved else 2.0)
    assert (corners[..., 1].min() > 10.0) == moved
    ds, _ = _curvilinear(centres[..., 0], centres[..., 1])
    fig, axs = _drawn(ds)
    assert all(isinstance(ax.projection, ccrs.PlateCarree) for ax in axs)
    cells = [c for c in axs[0].collections if isinstance(c, QuadMesh)]
    assert bool(cells) == moved
    fig.canvas.draw()


@pytest.mark.parametrize("offset", [0.25, 3.0])
def test_a_regional_grid_beside_a_pole_gets_a_polar_map_drawn_as_cells(offset):
    # a sea-ice grid on NSIDC's plane whose west edge passes the pole at a quarter of a cell
    # (the pole between its outer centres and its outer corners) or three cells away: on
    # PlateCarree it was a thin strip along the top edge (and the first drawn as points); now
    # a polar map, centred as the plane, the grid's cells whole and filling the box
    ccrs = pytest.importorskip("cartopy.crs")

    plane = ccrs.NorthPolarStereo(central_longitude=-45.0)
    x, y = np.meshgrid((np.arange(12) + offset) * 200e3, (np.arange(10) - 4.5) * 200e3)
    lonlat = ccrs.PlateCarree().transform_points(plane, x, y)
    lon, lat = lonlat[..., 0], lonlat[..., 1]
    from geogpvae.plot.polar import enclosed_pole

    assert enclosed_pole(lon, lat) is None and lat.min() > 60.0
    ds, _ = _curvilinear(lon, lat)
    fig, axs = _drawn(ds)
    ax = axs[0]
    assert isinstance(ax.projection, ccrs.NorthPolarStereo)
    assert abs(ax.projection.proj4_params["lon_0"] + 45.0) < 0.2
    corners = mesh(ax).get_coordinates()
    assert corners.shape[:2] == (11, 13)
    drawn = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    on_plane = plane.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    np.testing.assert_allclose(np.diff(on_plane[:, 0].reshape(11, 13), axis=1), 200e3, rtol=1e-3)  # the plane's cells (sphere vs ellipsoid)
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    side = max(x1 - x0, y1 - y0)
    np.testing.assert_allclose([drawn[:, 0].min(), drawn[:, 0].max(), drawn[:, 1].min(), drawn[:, 1].max()],
                               [x0, x1, y0, y1], atol=2e-3 * side)
    fig.canvas.draw()


def test_a_regular_grid_beside_a_pole_keeps_its_rectangle_and_sites_get_a_polar_map():
    # a regular lon/lat grid over 70-90 N, 0-30 E would be a thin wedge on a polar map: it keeps
    # its map; stations on Svalbard (76-80 N) get the polar map
    ccrs = pytest.importorskip("cartopy.crs")

    lat, lon = np.arange(70.5, 90.0), np.arange(0.5, 30.0)
    grid = xr.Dataset({"v": (("lat", "lon"), np.add.outer(lat, lon))},
                      coords={"lat": ("lat", lat, {"units": "degrees_north"}), "lon": ("lon", lon, {"units": "degrees_east"})})
    rng = np.random.default_rng(0)
    sites = xr.Dataset({"v": ("site", rng.normal(size=40))},
                       coords={"lon": ("site", rng.uniform(10, 30, 40), {"units": "degrees_east"}),
                               "lat": ("site", rng.uniform(76, 80, 40), {"units": "degrees_north"})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept, polar = plot.field_map(grid, "v"), plot.field_map(sites, "v")
    assert not isinstance(panels(kept)[0].projection, ccrs.NorthPolarStereo)
    assert isinstance(panels(polar)[0].projection, ccrs.NorthPolarStereo)


def test_only_data_that_reach_near_a_pole_are_beside_it():
    from geogpvae.plot.polar import NEAR_POLE, POLAR_EDGE, beside_pole

    assert beside_pole(69.0, 87.0) == "north" and beside_pole(-87.0, -69.0) == "south"
    assert beside_pole(POLAR_EDGE, NEAR_POLE) == "north" and beside_pole(-NEAR_POLE, -POLAR_EDGE) == "south"
    assert beside_pole(55.0, 71.0) is None  # Scandinavia keeps its map
    assert beside_pole(POLAR_EDGE - 1.0, 88.0) is None and beside_pole(-88.0, 1 - POLAR_EDGE) is None
    assert beside_pole(-85.0, 85.0) is None


def test_polar_corners_only_for_grids_all_around_a_pole():
    from geogpvae.plot.polar import polar_corners

    yx = (np.arange(8) - 3.5) * 100.0
    x, y = np.meshgrid(yx, yx)
    lat, lon = 90.0 - np.hypot(x, y) / 111.0, np.degrees(np.arctan2(x, -y))
    lon = lon[3, 3] + np.mod(lon - lon[3, 3] + 180.0, 360.0) - 180.0  # on one arc, as maps give them
    assert polar_corners(lon, lat) is not None
    # a regional grid at 70-78 N across the prime meridian (and one across the dateline) is no cap
    j, i = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    for west in (-10.0, 170.0):
        assert polar_corners(west + 3.0 * i, 70.0 + 2.0 * j) is None
