"""Tests of geogpvae.fields.labelling: provenance in the global attributes."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import numpy as np
import pytest
import xarray as xr

from geogpvae._version import __version__
from geogpvae.fields import labelling

_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: geogpvae \S+: .+$")


def _ds():
    return xr.Dataset({"v": ("i", [1.0, 2.0])},
                      attrs={"history": "2020-01-01: created\n2019-05-01: raw", "title": "t",
                             "geogpvae_stale": "old run"})


def test_provenance_history_prepended_and_options():
    ds = _ds()
    before = ds.copy(deep=True)
    attrs_before = dict(ds.attrs)
    options = {"engine": "gpvae", "neighbours": 16, "kernel": "matern52", "epochs": 200,
               "seed": None, "verbose": True, "lengths": (1.0, 2.5), "grid": {"nx": 2},
               "np_int": np.int64(7), "np_bool": np.bool_(False), "lr": 1e-3,
               "weights": np.array([1, 2])}
    out = labelling.add_provenance(ds, "impute(ds, vars=['v'],\n  epochs=200)", options)

    lines = out.attrs["history"].split("\n")
    assert len(lines) == 3
    assert _STAMP.match(lines[0]), lines[0]
    assert lines[0].endswith(f": geogpvae {__version__}: impute(ds, vars=['v'], epochs=200)")
    assert lines[1:] == ["2020-01-01: created", "2019-05-01: raw"]
    a = out.attrs
    assert a["geogpvae_version"] == __version__
    assert a["geogpvae_engine"] == "gpvae"
    assert a["geogpvae_neighbours"] == 16 and type(a["geogpvae_neighbours"]) is int
    assert a["geogpvae_kernel"] == "matern52"
    assert a["geogpvae_epochs"] == 200
    assert a["geogpvae_seed"] == "null"
    assert a["geogpvae_verbose"] == 1 and type(a["geogpvae_verbose"]) is int
    assert json.loads(a["geogpvae_lengths"]) == [1.0, 2.5]
    assert json.loads(a["geogpvae_grid"]) == {"nx": 2}
    assert a["geogpvae_np_int"] == 7 and type(a["geogpvae_np_int"]) is int
    assert a["geogpvae_np_bool"] == 0 and type(a["geogpvae_np_bool"]) is int
    assert a["geogpvae_lr"] == 1e-3
    assert json.loads(a["geogpvae_weights"]) == [1, 2]
    assert "geogpvae_stale" not in a  # a previous run's settings do not linger
    assert a["title"] == "t"
    # the input is untouched and the data are shared, not copied
    xr.testing.assert_identical(ds, before)
    assert ds.attrs == attrs_before
    assert np.shares_memory(out["v"].values, ds["v"].values)


def test_provenance_without_history_and_fixed_time():
    ds = xr.Dataset({"v": ("i", [1.0])})
    now = datetime(2024, 3, 1, 12, 30, 5, tzinfo=timezone.utc)
    out = labelling.add_provenance(ds, "impute(ds)", {"geogpvae_seed": 3, "odd key!": "x"}, now=now)
    assert out.attrs["history"] == f"2024-03-01T12:30:05Z: geogpvae {__version__}: impute(ds)"
    assert out.attrs["geogpvae_seed"] == 3
    assert out.attrs["geogpvae_odd_key_"] == "x"
    assert ds.attrs == {}


def test_provenance_twice_keeps_both_history_lines():
    ds = labelling.add_provenance(_ds(), "first", {"seed": 1},
                           now=datetime(2024, 1, 1, tzinfo=timezone.utc))
    ds = labelling.add_provenance(ds, "second", {"seed": 2},
                           now=datetime(2024, 1, 2, tzinfo=timezone.utc))
    lines = ds.attrs["history"].split("\n")
    assert lines[0].endswith(": second") and lines[1].endswith(": first")
    assert lines[0].startswith("2024-01-02T00:00:00Z") and len(lines) == 4
    assert ds.attrs["geogpvae_seed"] == 2


@pytest.mark.parametrize(
    "value, expected",
    [(True, 1), (False, 0), (None, "null"), (3, 3), (2.5, 2.5), ("s", "s"),
     ([1, "a"], '[1, "a"]'), (np.float32(0.5), 0.5),
     ({"b": 1, "a": [True]}, '{"a": [true], "b": 1}')],
)
def test_attr_value(value, expected):
    assert labelling.attr_value(value) == expected
