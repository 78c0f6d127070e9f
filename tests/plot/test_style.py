"""Limits, norms, labels, units and colours for figures (geogpvae/plot/style.py)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from figure_helpers import make_volume, mesh, panels
from matplotlib.colors import LogNorm

from geogpvae import plot
from geogpvae.plot import style


def test_robust_limits_percentiles_and_nan():
    a = np.arange(101.0)
    b = np.array([np.nan, 1e6])
    lo, hi = plot.robust_limits(a, percentiles=(1, 99))
    assert (lo, hi) == pytest.approx((1.0, 99.0))
    lo, hi = plot.robust_limits(a, b, percentiles=(0, 100))
    assert (lo, hi) == (0.0, 1e6)
    assert plot.robust_limits(np.full(3, np.nan)) == (0.0, 1.0)
    lo, hi = plot.robust_limits(np.full(4, 2.0))
    assert lo < 2.0 < hi
    ma = np.ma.masked_greater(a, 50)
    assert plot.robust_limits(ma, percentiles=(0, 100)) == (0.0, 50.0)


def test_robust_limits_log_ignore_non_positive():
    lo, hi = plot.robust_limits(np.array([-1.0, 0.0, 1.0, 10.0, 100.0]), percentiles=(0, 100),
                                log=True)
    assert (lo, hi) == pytest.approx((1.0, 100.0))
    norm = plot.make_norm(0.0, 50.0, log=True)
    assert isinstance(norm, LogNorm) and norm.vmin > 0 and norm.vmax == 50.0
    assert not isinstance(plot.make_norm(0.0, 1.0), LogNorm)


def test_label_for_uses_long_name_and_units():
    da = xr.DataArray([1.0], attrs={"long_name": "permeability in x", "units": "mD"}, name="kx")
    assert plot.label_for(da) == "permeability in x [mD]"
    assert plot.label_for(xr.DataArray([1.0], name="a_b")) == "a b"


def test_coordinate_values_are_rounded_for_titles():
    assert style._fmt_value(12.4968) == "12.5"
    assert style._fmt_value(0.3048) == "0.305"
    assert style._fmt_value(6.0) == "6"
    assert style._fmt_value(np.int32(21)) == "21"
    assert style._fmt_value(1234.5678) == "1235"
    # neighbours stay apart: 3 significant digits would print 1500 for both
    assert style._fmt_value(1500.3, step=0.3) == "1500.3"
    assert style._fmt_value(1500.6, step=0.3) == "1500.6"
    assert style._fmt_value(np.datetime64("2001-02-15T00:00")) == "2001-02-15"
    # hourly data keep their hours (each panel its own title), and cftime dates read the same way
    assert style._fmt_value(np.datetime64("2001-02-15T06:00:00.000000000")) == "2001-02-15 06:00"
    cftime = pytest.importorskip("cftime")
    assert style._fmt_value(cftime.DatetimeNoLeap(2000, 1, 15)) == "2000-01-15"
    assert style._fmt_value(cftime.Datetime360Day(2000, 2, 30, 12)) == "2000-02-30 12:00"


def test_units_typeset_for_figures():
    assert plot.pretty_units("mg kg-1") == "mg kg\u207b\u00b9"
    assert plot.pretty_units("m2 s-1") == "m\u00b2 s\u207b\u00b9"
    assert plot.pretty_units("W m^-2") == "W m\u207b\u00b2"
    assert plot.pretty_units("degrees_east") == "\u00b0E"
    assert plot.pretty_units("mD") == "mD"
    assert plot.pretty_units("1") == "" and plot.pretty_units(None) == ""
    assert plot.pretty_units("days since 2000-01-01") == "days since 2000-01-01"
    da = xr.DataArray([1.0], attrs={"long_name": "zinc", "units": "mg kg-1"})
    assert plot.label_for(da) == "zinc [mg kg\u207b\u00b9]"


def test_std_colour_map_keeps_clear_of_the_grey_of_empty_cells():
    from matplotlib.colors import to_rgb

    ds, _ = make_volume()
    fig = plot.layers(ds, "kx", layer=1)
    std = mesh(panels(fig)[2])
    grey = np.array(to_rgb(style.MASKED_COLOUR))
    colours = std.cmap(np.linspace(0, 1, 64))[:, :3]
    # no colour of the map is as light and as grey as the masked cells
    assert np.min(np.abs(colours - grey).sum(axis=1)) > 0.25
