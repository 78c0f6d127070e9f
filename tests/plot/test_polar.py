"""Which pole a grid encloses and how its polar map is turned (geogpvae/plot/polar.py)."""

import numpy as np
import pytest

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
