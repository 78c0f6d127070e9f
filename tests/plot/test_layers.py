"""``plot.layers`` (geogpvae/plot/layers.py): panels, shared limits, titles, orientation, layout."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import xarray as xr
from figure_helpers import (
    assert_masked_equal,
    colorbars,
    inches,
    make_spe10_like,
    make_volume,
    mesh,
    panels,
)
from matplotlib.colors import LogNorm

from geogpvae import plot


def is_colorbar_axes(ax):
    return ax.get_label() == "<colorbar>"


def test_layers_panels_and_drawn_data():
    ds, truth = make_volume()
    fig = plot.layers(ds, "porosity", layer=[1, 6], truth=truth)  # layer numbers, from 1
    axs = panels(fig)
    assert [ax.get_gid() for ax in axs] == ["observed", "imputed", "truth", "std", "error"] * 2
    assert set(colorbars(fig)) == {"colorbar:value", "colorbar:uncertainty"}
    assert len([ax for ax in fig.axes if not is_colorbar_axes(ax)]) == 10
    for row, k in enumerate([0, 5]):
        v = ds["porosity"].isel(z=k).values
        flag = ds["porosity_imputed"].isel(z=k).values
        sd = ds["porosity_std"].isel(z=k).values
        t = truth["porosity"].isel(z=k).values
        expected = {
            "observed": np.where(flag == 0, v, np.nan),
            "imputed": v,
            "truth": t,
            "std": np.where(flag == 1, sd, np.nan),
            "error": np.where(flag == 1, np.abs(v - t), np.nan),
        }
        for ax in axs[5 * row: 5 * row + 5]:
            assert_masked_equal(mesh(ax).get_array(), expected[ax.get_gid()])
    # holes really are holes: the observed panel masks every imputed and outside cell
    obs = mesh(axs[0]).get_array()
    assert np.ma.count_masked(obs) == np.sum(ds["porosity_imputed"].isel(z=0).values != 0)
    # under each panel, the domain in grey: masked (white) exactly outside the domain
    for ax in axs[:5]:
        domain = [c for c in ax.collections if c.get_gid() == "domain"]
        assert len(domain) == 1
        np.testing.assert_array_equal(np.ma.getmaskarray(domain[0].get_array()),
                                      ds["porosity_imputed"].isel(z=0).values == -127)
        assert domain[0].get_zorder() < mesh(ax).get_zorder()


def test_layers_shared_limits_and_norms():
    ds, truth = make_volume()
    fig = plot.layers(ds, "kx", layer=[2, 3, 4], truth=truth)
    axs = panels(fig)
    values = [mesh(ax) for ax in axs if ax.get_gid() in ("observed", "imputed", "truth")]
    uncert = [mesh(ax) for ax in axs if ax.get_gid() in ("std", "error")]
    assert len(values) == 9 and len(uncert) == 6
    assert len({m.get_clim() for m in values}) == 1
    assert len({m.get_clim() for m in uncert}) == 1
    assert all(isinstance(m.norm, LogNorm) for m in values + uncert)
    assert values[0].get_clim()[0] > 0

    fig = plot.layers(ds, "porosity", layer=[2, 3])
    meshes = [mesh(ax) for ax in panels(fig)]
    assert not any(isinstance(m.norm, LogNorm) for m in meshes)
    # the std scale follows the data (robust limits of the imputed cells), not 0
    stds = np.concatenate([np.ma.compressed(meshes[i].get_array()) for i in (2, 5)])
    lo, _ = meshes[2].get_clim()
    assert lo == pytest.approx(np.percentile(stds, 1.0), rel=1e-6) and lo > 0.0

    fig = plot.layers(ds, "kx", layer=2, log=False)
    assert not any(isinstance(mesh(ax).norm, LogNorm) for ax in panels(fig))
    fig = plot.layers(ds, "porosity", layer=2, log=True)
    assert all(isinstance(mesh(ax).norm, LogNorm) for ax in panels(fig))


def test_layers_row_sharing_gives_row_limits():
    ds, _ = make_volume()
    fig = plot.layers(ds, "kx", layer=[1, 6], share="row")
    axs = panels(fig)
    assert len(colorbars(fig)) == 0 or True  # gids are reused per row
    cbs = [ax for ax in fig.axes if is_colorbar_axes(ax)]
    assert len(cbs) == 4
    row0 = {mesh(ax).get_clim() for ax in axs[:2]}
    row1 = {mesh(ax).get_clim() for ax in axs[3:5]}
    assert len(row0) == 1 and len(row1) == 1 and row0 != row1


def test_layers_colorbar_labels_and_titles():
    ds, truth = make_volume()
    fig = plot.layers(ds, "kx", layer=6, truth=truth)
    cbs = colorbars(fig)
    value_label = cbs["colorbar:value"].get_xlabel()
    assert "permeability in x" in value_label and "[mD]" in value_label
    assert "[mD]" in cbs["colorbar:uncertainty"].get_xlabel()
    assert "std" in cbs["colorbar:uncertainty"].get_xlabel()
    for ax in panels(fig):
        title = ax.get_title()
        assert "layer 6" in title  # 1-based
        assert "z = 6 m" in title  # coordinate value: 3.0 + 0.6 * 5
    fig = plot.layers(ds, "kx", layer=1)
    assert all("layer 1 (z = 3 m)" in ax.get_title() for ax in panels(fig))
    assert len(panels(fig)) == 3  # observed, imputed, std


def test_layers_orientation_follows_coordinates():
    ds, _ = make_volume(descending_y=True)
    # a field equal to its y coordinate tells where each row was drawn
    ds["porosity"] = ds["porosity"] * 0 + ds["y"]
    fig = plot.layers(ds, "porosity", layer=1)
    ax = panels(fig)[1]
    m = mesh(ax)
    corners = m.get_coordinates()  # (ny + 1, nx + 1, 2) cell corners
    centre_y = 0.5 * (corners[:-1, :-1, 1] + corners[1:, 1:, 1])
    centre_x = 0.5 * (corners[:-1, :-1, 0] + corners[1:, 1:, 0])
    arr = m.get_array()
    ok = ~np.ma.getmaskarray(arr)
    np.testing.assert_allclose(np.asarray(arr)[ok], centre_y[ok])
    np.testing.assert_allclose(centre_x[0], ds["x"].values)
    bottom, top = ax.get_ylim()
    assert bottom < top  # y increases upwards although stored descending
    left, right = ax.get_xlim()
    assert left < right
    assert ax.get_aspect() == 1.0  # x and y both in m

    # a vertical section: depth (positive down) increases downwards, free aspect
    ds2, _ = make_volume()
    ds2["porosity"] = ds2["porosity"] * 0 + ds2["z"]
    fig = plot.layers(ds2, "porosity", layer=4, axis="y")
    ax = panels(fig)[1]
    m = mesh(ax)
    corners = m.get_coordinates()
    centre_z = 0.5 * (corners[:-1, :-1, 1] + corners[1:, 1:, 1])
    arr = m.get_array()
    ok = ~np.ma.getmaskarray(arr)
    np.testing.assert_allclose(np.asarray(arr)[ok], centre_z[ok])
    bottom, top = ax.get_ylim()
    assert bottom > top  # inverted: deeper is lower
    assert ax.get_aspect() == "auto"
    # a vertical section is not a layer: the title gives where it is, not a layer number
    assert "layer" not in ax.get_title() and "y = 35 m" in ax.get_title()
    assert ax.get_xlabel().startswith("x") and panels(fig)[0].get_ylabel().startswith("depth")


def test_layer_numbers_and_coordinate_values_select_the_same_layers():
    ds, _ = make_volume()  # z = 3.0, 3.6, ..., 6.0 m
    da = ds["kx"]
    assert plot.layer_positions(da, "z", [1, 6]) == [0, 5]
    assert plot.layer_positions(da, "z", [3.6, 4.75]) == [1, 3]  # nearest, within half a cell
    assert plot.layer_positions(da, "z", None) == [0]
    spe = make_spe10_like()  # layer coordinate 1, 3, 5, ...
    assert plot.layer_positions(spe["kx"], "z", [1, 21]) == [0, 10]
    with pytest.raises(ValueError, match="numbered 1 to"):
        plot.layer_positions(spe["kx"], "z", 2)  # an even layer was dropped by downsampling
    a = plot.layers(spe, "kx", layer=21)
    b = plot.layers(spe, "kx", layer=float(spe.z[10]))
    assert [ax.get_title() for ax in panels(a)] == [ax.get_title() for ax in panels(b)]


def test_layers_bad_requests():
    ds, _ = make_volume()
    for bad in (7, 0, -1, [1, 9]):
        with pytest.raises(ValueError, match="numbered 1 to 6"):
            plot.layers(ds, "kx", layer=bad)
    with pytest.raises(ValueError, match="z value from 3 to 6 m"):
        plot.layers(ds, "kx", layer=9.5)  # a depth outside the grid
    with pytest.raises(ValueError):
        plot.layers(ds, "kx", axis="t")
    with pytest.raises(KeyError):
        plot.layers(ds, "nope")


def test_layers_of_a_2d_field():
    ds, _ = make_volume()
    two_d = ds.isel(z=2)
    fig = plot.layers(two_d, "porosity")
    assert [ax.get_gid() for ax in panels(fig)] == ["observed", "imputed", "std"]
    assert all("z = 4.2 m" in ax.get_title() for ax in panels(fig))  # the scalar coordinate
    assert_masked_equal(mesh(panels(fig)[1]).get_array(), two_d["porosity"].values)
    # a layer asked of a field without layers is an error, not the whole field drawn
    with pytest.raises(ValueError, match=r"'porosity' is a 2-D field .* one layer with no others along 'z'"):
        plot.layers(two_d, "porosity", layer=3)
    one = plot.layers(two_d, "porosity", layer=1)  # its one layer
    assert_masked_equal(mesh(panels(one)[1]).get_array(), two_d["porosity"].values)


def test_layers_titles_use_the_layer_coordinate_and_round_the_depth():
    ds = make_spe10_like()
    fig = plot.layers(ds, "kx", layer=[1, 21])  # SPE10's own layer numbers
    titles = [ax.get_title() for ax in panels(fig)]
    assert all("layer 1 (z = 0.305 m)" in t for t in titles[:3])
    assert all("layer 21 (z = 12.5 m)" in t for t in titles[3:])
    assert not any("12.4968" in t or "layer 11" in t for t in titles)
    # without the coordinate, the layer number is the 1-based index
    fig = plot.layers(ds.drop_vars("layer"), "kx", layer=11)
    assert all("layer 11 (z = 12.5 m)" in ax.get_title() for ax in panels(fig))
    # a layer selected beforehand: its number first, and no units "1" after it
    fig = plot.layers(ds.isel(z=10), "kx")
    title = panels(fig)[0].get_title()
    assert "layer 21, z = 12.5 m" in title and "21 1" not in title


def test_layers_axis_labels_fit_narrow_panels():
    ds = make_spe10_like()
    fig = plot.layers(ds, "kx", layer=[3, 5])
    bottom = [ax for ax in panels(fig)[3:]]
    assert [ax.get_xlabel() for ax in bottom] == ["x [m]"] * 3
    assert all(ax.get_xlabel() == "" for ax in panels(fig)[:3])  # outer panels only
    fig.canvas.draw()
    boxes = [inches(fig, ax.xaxis.label) for ax in bottom]
    for left, right in itertools.pairwise(boxes):
        assert left.x1 < right.x0  # neighbouring labels do not touch
    # wide panels keep the long names
    fig = plot.layers(ds, "kx", layer=3, panel_width=4.5)
    assert panels(fig)[0].get_xlabel() == "x coordinate of the cell centre [m]"


def test_layers_tall_panels_leave_no_gap_above_the_colourbars():
    ds = make_spe10_like()
    fig = plot.layers(ds, "kx", layer=[3, 5, 7], truth=ds)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_inches = fig.dpi_scale_trans.inverted()
    lowest = min(ax.get_tightbbox(renderer).transformed(to_inches).y0 for ax in panels(fig))
    for cb in colorbars(fig).values():
        top = cb.get_position().y1 * fig.get_size_inches()[1]
        assert 0.0 < lowest - top < 0.2  # the x labels, then the colourbar, close below
    width, height = fig.get_size_inches()
    used = fig.get_tightbbox(renderer)
    assert height - used.height < 0.3 and width - used.width < 0.3


def _realisations_of(ds, var, n=3, seed=5):
    """A file as ``simulate`` writes it: ``var`` on (realization, ...), its flag without that dim."""
    rng = np.random.default_rng(seed)
    flag = ds[f"{var}_imputed"]
    draws = [ds[var].where(flag != 1, ds[var] * np.exp(0.2 * rng.normal(size=ds[var].shape))) for _ in range(n)]
    out = ds[[f"{var}_imputed"]].copy()
    out[var] = xr.concat(draws, "realization").assign_attrs(ds[var].attrs, ancillary_variables=f"{var}_imputed")
    return out.assign_coords(realization=("realization", np.arange(n), {"standard_name": "realization"}))


def test_layers_and_maps_of_one_realisation():
    """A realisation file: the layers and the map of the picked realisation, its holes from the flag."""
    ds, _ = make_volume()
    draws = _realisations_of(ds, "kx")
    fig = plot.layers(draws.isel(realization=2), "kx", layer=[3])
    axs = {ax.get_gid(): ax for ax in panels(fig)}
    assert set(axs) == {"observed", "imputed"}
    assert_masked_equal(mesh(axs["imputed"]).get_array(), draws.kx.isel(realization=2, z=2).values)
    fig = plot.field_map(draws, "kx", isel={"realization": 1, "z": 2})
    axs = {ax.get_gid(): ax for ax in panels(fig)}
    assert_masked_equal(mesh(axs["imputed"]).get_array(), draws.kx.isel(realization=1, z=2).values)


def test_realisations_of_a_map_as_rows():
    """A 2-D field's realisations drawn one per row, along ``realization``."""
    ds, _ = make_volume()
    draws = _realisations_of(ds.isel(z=0, drop=True), "porosity")
    fig = plot.layers(draws, "porosity", layer=[1, 3], axis="realization")
    imputed = [ax for ax in panels(fig) if ax.get_gid() == "imputed"]
    for ax, r in zip(imputed, [0, 2], strict=True):
        assert_masked_equal(mesh(ax).get_array(), draws.porosity.isel(realization=r).values)
