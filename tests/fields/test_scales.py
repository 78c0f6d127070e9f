"""A coordinate without length units beside longitude/latitude in km (geogpvae.fields.scales)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import xarray as xr

from geogpvae.fields.geometry import EARTH_RADIUS_KM
from geogpvae.fields.scales import unitless_axes
from geogpvae.fields.stacking import prepare_field


def _levels(units: str | None) -> xr.Dataset:
    """Three s-levels on a 1-degree grid near the equator; the levels differ by 2."""
    lat, lon, s = np.arange(-4.0, 5.0), np.arange(10.0, 20.0), np.array([-5 / 6, -0.5, -1 / 6])
    rng = np.random.default_rng(0)
    base = np.sin(lon / 3)[None, :] + np.cos(lat / 4)[:, None]
    v = np.stack([base + 2 * k for k in range(3)])
    v[2][rng.random(base.shape) < 0.3] = np.nan  # gaps at the surface only
    attrs = {"positive": "up", **({} if units is None else {"units": units})}
    return xr.Dataset({"temp": (("s", "lat", "lon"), v)},
                      coords={"s": ("s", s, attrs), "lat": ("lat", lat, {"units": "degrees_north"}),
                              "lon": ("lon", lon, {"units": "degrees_east"})})


def test_a_unitless_level_beside_km_is_warned_about_with_the_scale_to_give():
    spacing = EARTH_RADIUS_KM * np.radians(1.0)  # about 111 km between neighbouring places
    with pytest.warns(UserWarning, match="s \\(step 0.333, counted as 0.333 km\\) has no length units") as seen:
        field = prepare_field(_levels(None), ["temp"])
    (found,) = unitless_axes(field.geometry, field.x)
    assert found[0] == "s" and found[1] == pytest.approx(1 / 3) and found[2] == pytest.approx(spacing, rel=0.01)
    scale = float(re.search(r"coord_scale=\{'s': ([0-9.]+)\}", str(seen[0].message)).group(1))
    assert scale == pytest.approx(spacing * 3, rel=0.01)  # one step as far as one place
    assert "--option coord_scale.s=" in str(seen[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(_levels(None), ["temp"], coord_scale={"s": scale})  # scaled: nothing to say
        prepare_field(_levels("m"), ["temp"])  # a length: metres count as km, levels far apart
    with pytest.warns(UserWarning, match="has no length units"):
        prepare_field(_levels("1"), ["temp"])  # CF's unit of a ratio
    with pytest.warns(UserWarning, match="has no length units"):  # a scale for another axis only
        prepare_field(_levels(None), ["temp"], coord_scale={"lat": 1.0})


def test_unitless_numbers_that_are_no_level_are_left_alone():
    # a month number or a time dim without a coordinate beside lon/lat: their scale is the
    # learnt metric's business, not a column of levels
    months = _levels(None).rename(s="month").assign_coords(month=("month", [1.0, 2.0, 3.0]))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        prepare_field(months, ["temp"])
        prepare_field(months.drop_vars("month"), ["temp"])  # a dim without a coordinate
    assert not [w for w in seen if "length units" in str(w.message)]
    # the same numbers named as a level, or marked vertical, are one
    with pytest.warns(UserWarning, match="lev \\(step 1, counted as 1 km\\) has no length units"):
        prepare_field(months.rename(month="lev"), ["temp"])


def test_only_geometries_on_the_sphere_are_looked_at():
    ds = _levels(None).rename({"lat": "y", "lon": "x"})
    ds["y"].attrs, ds["x"].attrs = {"units": "km"}, {"units": "km"}
    field = prepare_field(ds, ["temp"])
    assert unitless_axes(field.geometry, field.x) == []
