"""``plot.profile`` (geogpvae/plot/profiles.py): transects, well logs, one well of many."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from figure_helpers import _gaussian_case

from geogpvae import plot


def _profile_case(vertical: bool = False, log: bool = False):
    """A 1-D output as impute writes it: observed values with std 0, imputed ones with a std."""
    n = 60
    where = np.arange(n, dtype=float)
    truth = 2.0 + np.sin(where / 6.0)
    flag = np.zeros(n, dtype=np.int8)
    flag[20:30] = 1
    sd = np.where(flag == 1, 0.3, 0.0)
    value = np.where(flag == 1, 2.0, truth)
    attrs = {"units": "m", "long_name": "level"}
    if log:
        attrs["geogpvae_transform"] = "log"
    dim = "depth" if vertical else "x"
    coord = {"positive": "down", "units": "m"} if vertical else {"units": "km"}
    ds = xr.Dataset({"v": (dim, value, attrs), "v_std": (dim, sd), "v_imputed": (dim, flag)},
                    coords={dim: (dim, where, coord)})
    return ds, xr.DataArray(truth, dims=dim, coords={dim: where})


def test_profile_of_a_one_dimensional_field():
    ds, truth = _profile_case()
    fig = plot.profile(ds, "v", truth=truth)
    (ax,) = fig.axes
    lines = {a.get_gid(): a for a in ax.get_children() if a.get_gid()}
    assert {"observed", "imputed", "band", "truth"} <= set(lines)
    np.testing.assert_array_equal(lines["imputed"].get_xdata(), np.arange(20.0, 30.0))
    assert len(lines["observed"].get_xdata()) == 50
    # the band: 1.96 std either side where imputed, no width where observed
    (path,) = lines["band"].get_paths()
    x, y = path.vertices.T
    assert y[(x >= 20) & (x <= 29)].max() == pytest.approx(2.0 + 1.96 * 0.3, abs=1e-3)
    assert y[(x >= 20) & (x <= 29)].min() == pytest.approx(2.0 - 1.96 * 0.3, abs=1e-3)
    at = (x == 40.0)  # observed: the band closes on the value
    assert y[at].min() == pytest.approx(y[at].max()) == pytest.approx(truth.values[40])
    assert ax.get_ylabel() == "level [m]" and ax.get_xlabel().startswith("x")
    # a transect stored out of order is drawn along its coordinate, the same line
    shuffled = ds.isel(x=np.random.default_rng(0).permutation(60))
    again = {a.get_gid(): a for a in plot.profile(shuffled, "v", truth=truth).axes[0].get_children() if a.get_gid()}
    np.testing.assert_array_equal(again["truth"].get_xydata(), lines["truth"].get_xydata())
    np.testing.assert_array_equal(again["imputed"].get_xdata(), np.arange(20.0, 30.0))
    # field_map has no map of a transect: it draws the profile
    assert {a.get_gid() for a in plot.field_map(ds, "v").axes} == {"profile"}
    with pytest.raises(ValueError, match=r"one-dimensional"):
        plot.profile(_gaussian_case()[0].expand_dims(t=2), "v")


def test_profile_of_a_well_log_runs_down_and_log_bands_are_asymmetric():
    ds, _ = _profile_case(vertical=True, log=True)
    ax = plot.profile(ds, "v").axes[0]
    assert ax.yaxis_inverted() and ax.get_xscale() == "log"
    (band,) = [a for a in ax.get_children() if a.get_gid() == "band"]
    value, depth = band.get_paths()[0].vertices.T
    gap = value[(depth >= 20) & (depth <= 29)]
    assert gap.max() - 2.0 > 2.0 - gap.min() + 0.05 > 0.05  # exp(mu +- z s) around the median 2


def test_profile_of_one_well_is_drawn_along_its_measured_depth():
    # one well of a (well, depth) output whose measured depth md (well, depth) differs per well:
    # after isel(well=...) md is the only coordinate on the dim 'depth', which has none of its own
    ds, _ = _profile_case(vertical=True)
    md = 1700.0 + 0.5 * ds.depth.values
    one = ds.drop_vars("depth").assign_coords(
        md=("depth", md, {"units": "m", "positive": "down", "long_name": "measured depth"}))
    ax = plot.profile(one, "v").axes[0]
    imputed = next(a for a in ax.get_children() if a.get_gid() == "imputed")
    np.testing.assert_array_equal(imputed.get_ydata(), md[20:30])
    assert ax.yaxis_inverted() and ax.get_ylabel() == "measured depth [m]"
    # two coordinates on the dim: neither is chosen, positions as before
    two = one.assign_coords(tvd=("depth", md - 50.0, {"units": "m"}))
    assert plot.profile(two, "v").axes[0].get_ylabel() == "position along depth"


def _wells(names: bool):
    """Logs on (well, depth) as impute writes them: three wells, x/y on the well dim."""
    one, truth = _profile_case(vertical=True)
    ds = xr.concat([one.assign(v=one.v + k) for k in range(3)], dim="well", coords="minimal")
    ds = ds.assign_coords(x=("well", [0.0, 500.0, 900.0], {"units": "m"}), y=("well", [0.0, 300.0, -200.0], {"units": "m"}))
    if names:
        ds = ds.assign_coords(well=["A-1", "B-2", "C-3"])
    return ds, xr.concat([truth + k for k in range(3)], dim="well")


@pytest.mark.parametrize("names", [False, True])
def test_isel_of_one_well_draws_its_log(names):
    # the log of the second well, along its depth (down), titled with the well picked; the truth too
    ds, truth = _wells(names)
    fig = plot.field_map(ds, "v", truth=truth, isel={"well": 1})
    (ax,) = fig.axes
    lines = {a.get_gid(): a for a in ax.get_children() if a.get_gid()}
    assert ax.get_gid() == "profile" and {"imputed", "truth"} <= set(lines)
    np.testing.assert_array_equal(lines["imputed"].get_ydata(), np.arange(20.0, 30.0))
    np.testing.assert_allclose(lines["truth"].get_xdata(), truth.isel(well=1).values)
    assert ax.yaxis_inverted()
    assert ax.get_title() == ("level (well = B-2)" if names else "level (well index 1)")  # long_name
    # a depth picked: the wells on a map, as before
    assert all(a.get_gid() != "profile" for a in plot.field_map(ds, "v", isel={"depth": 25}).axes)
    with pytest.raises(IndexError, match="index 3 out of range for .well. of size 3"):
        plot.field_map(ds, "v", isel={"well": 3})
