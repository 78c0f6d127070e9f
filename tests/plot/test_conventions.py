"""What every figure reads from a Dataset (geogpvae/plot/conventions.py): a truth matched by its
coordinates, a field without a flag, a field with nothing to draw."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from figure_helpers import (
    _empty_fields,
    _gaussian_case,
    assert_masked_equal,
    make_volume,
    mesh,
    panels,
    predicted_grid,
)

from geogpvae import plot


def test_a_truth_is_matched_to_the_field_by_its_coordinates():
    ds, truth = _gaussian_case(n=400)
    ds = ds.assign_coords(x=("cell", np.linspace(0.0, 1.0, 400)), y=("cell", np.cos(np.arange(400.0))))
    truth = truth.assign_coords(x=ds.x, y=ds.y)
    cov = plot.interval_coverage(ds, "v", truth)
    # the same sites in another order (a truth file sorted by y), and with float32 coordinates
    assert plot.interval_coverage(ds, "v", truth.sortby("y")) == cov
    assert plot.interval_coverage(ds, "v", truth.assign_coords(y=truth.y.astype("float32"))) == cov
    with pytest.raises(ValueError, match=r"truth's x, y along 'cell' are not the field's"):
        plot.interval_coverage(ds, "v", truth.assign_coords(x=truth.x + 5.0))
    # a grid whose truth runs the other way along y (as latitudes often do)
    grid = xr.Dataset({k: (("y", "x"), ds[k].values.reshape(20, 20)) for k in ("v", "v_std", "v_imputed")},
                      coords={"y": np.arange(20.0), "x": np.arange(20.0)})
    gtruth = xr.DataArray(truth.values.reshape(20, 20), dims=("y", "x"), coords=grid.coords)
    assert plot.interval_coverage(grid, "v", gtruth) == cov
    assert plot.interval_coverage(grid, "v", gtruth.isel(y=slice(None, None, -1))) == cov


def test_field_map_without_flag_treats_positive_std_as_predicted():
    ds, inside = predicted_grid()
    fig = plot.field_map(ds, "Cd")
    field, std = panels(fig)
    # every prediction has its std drawn; only outside the study area is masked
    assert_masked_equal(mesh(std).get_array(), ds["Cd_std"].values)
    assert np.ma.count(mesh(std).get_array()) == inside.sum()
    assert field.get_title() == "predicted field"
    # nothing is observed, so there are no holes to outline (it would trace the border)
    assert not [c for c in field.collections if c.get_gid() == "outline"]
    domain = next(c for c in field.collections if c.get_gid() == "domain")
    np.testing.assert_array_equal(np.ma.getmaskarray(domain.get_array()), ~inside)

    # impute's output without its flag: a std of 0 marks the observed cells again
    layer, _ = make_volume()
    layer = layer.isel(z=0).drop_vars("kx_imputed")
    layer["kx"].attrs["ancillary_variables"] = "kx_std"
    flag = make_volume()[0]["kx_imputed"].isel(z=0).values
    fig = plot.field_map(layer, "kx")
    field, std = panels(fig)
    assert field.get_title() == "imputed field"
    assert_masked_equal(mesh(std).get_array(),
                        np.where(flag == 1, layer["kx_std"].values, np.nan))
    fig = plot.layers(layer.expand_dims("z"), "kx")
    observed = panels(fig)[0]
    assert_masked_equal(mesh(observed).get_array(),
                        np.where(flag == 0, layer["kx"].values, np.nan))


@pytest.mark.parametrize("kind", ["grid", "sites", "line", "volume"])
def test_a_field_without_any_value_is_refused_not_drawn_empty(kind):
    """An all-NaN variable used to give empty panels with a made-up 0-1 colour bar."""
    ds = _empty_fields()[kind]
    draw = plot.layers if kind == "volume" else plot.field_map
    with pytest.raises(ValueError, match="'v' has no value anywhere"):
        draw(ds, "v")
