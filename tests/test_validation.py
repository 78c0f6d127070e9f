"""geogpvae.validate: values held out of the input, imputed, and scored against what was removed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae import InputError
from geogpvae.datasets import make_gaussian_field


def _capture(monkeypatch, mean_of=None, std=0.5):
    """Replace impute with a stub that records its input and predicts ``mean_of(name, truth)``."""
    import geogpvae.api

    seen = {}

    def fake(work, names, **kwargs):
        seen["work"], seen["kwargs"] = work.copy(deep=True), kwargs
        out = work.copy()
        for n in names:
            filled = work[n].fillna(0.0) if mean_of is None else mean_of(n)
            out[n] = work[n].fillna(filled)
            out[f"{n}_std"] = xr.where(work[n].isnull(), std, 0.0)
        return out

    monkeypatch.setattr(geogpvae.api, "impute", fake)
    return seen


def test_held_out_values_are_removed_from_the_input_and_nothing_else(monkeypatch):
    ds = make_gaussian_field((30, 30), n_vars=2, seed=3)
    before = ds.copy(deep=True)
    seen = _capture(monkeypatch)
    scores = geogpvae.validate(ds, ["v0", "v1"], share=0.2, seed=5)
    for n in ("v0", "v1"):
        given, passed = ds[n].notnull().values, seen["work"][n].notnull().values
        removed = given & ~passed
        assert not (passed & ~given).any()  # nothing new appears
        np.testing.assert_array_equal(seen["work"][n].values[passed], ds[n].values[passed])  # the rest intact
        assert abs(removed.sum() / given.sum() - 0.2) < 0.03
        assert int(scores.n.sel(variable=n)) == removed.sum()
    assert seen["kwargs"]["seed"] == 5
    xr.testing.assert_identical(ds, before)  # the input is not modified


def test_scores_are_those_of_the_held_out_values(monkeypatch):
    ds = make_gaussian_field((20, 20), n_vars=2, seed=4)
    ds["v0"].attrs["units"] = "mg/kg"
    truth = {n: ds[n].copy() for n in ("v0", "v1")}
    # predictions off by +0.3 (v0) and -1.0 (v1), std 0.5: |z| = 0.6 (inside) and 2.0 (outside)
    shift = {"v0": 0.3, "v1": -1.0}
    _capture(monkeypatch, mean_of=lambda n: truth[n].fillna(0.0) + shift[n], std=0.5)
    scores = geogpvae.validate(ds, ["v0", "v1"], share=0.3, seed=1)
    for n, s in shift.items():
        row = scores.sel(variable=n)
        assert float(row.rmse) == pytest.approx(abs(s))
        assert float(row.mae) == pytest.approx(abs(s))
        assert float(row.z2) == pytest.approx((s / 0.5) ** 2)
        assert float(row.nll) == pytest.approx(0.5 * np.log(2 * np.pi * 0.25) + 0.5 * (s / 0.5) ** 2)
    assert float(scores.cov95.sel(variable="v0")) == 1.0 and float(scores.cov95.sel(variable="v1")) == 0.0
    assert scores.units.sel(variable="v0").item() == "mg/kg"


def test_the_coverage_range_is_wilsons_interval_and_holds_its_level():
    from geogpvae.validation import coverage_range

    low, high = coverage_range(3, 6)  # the small survey of a user's pass: cov95 0.5 from 6 values
    assert (low, high) == pytest.approx((0.1876, 0.8124), abs=1e-4)
    assert coverage_range(6, 6) == pytest.approx((0.6097, 1.0), abs=1e-4)  # bounded by 1, not 1 + ...
    assert coverage_range(0, 10)[0] == 0.0 and coverage_range(95, 100) == pytest.approx((0.8883, 0.9785), abs=1e-4)
    assert np.isnan(coverage_range(0, 0)).all()
    # its level: for a true coverage of 0.95 and n = 40, the range holds 0.95 in about 95 % of draws
    rng = np.random.default_rng(0)
    hits = rng.binomial(40, 0.95, 4000)
    inside = np.mean([lo <= 0.95 <= hi for lo, hi in (coverage_range(int(h), 40) for h in hits)])
    assert 0.93 < inside < 0.99


def test_few_held_out_values_come_with_their_coverage_range(monkeypatch):
    """A small survey scores few held-out values: the ranges are in the result and a warning says so."""
    ds = make_gaussian_field((9, 9), n_vars=2, seed=4)
    truth = {n: ds[n].copy() for n in ("v0", "v1")}
    _capture(monkeypatch, mean_of=lambda n: truth[n].fillna(0.0) + 0.3, std=0.5)
    with pytest.warns(UserWarning, match=r"few held-out values scored: v0 on (\d+) \(cov95 (0\.\d\d)-1\.00\), v1 on") as rec:
        scores = geogpvae.validate(ds, ["v0", "v1"], share=0.2, seed=1)
    n = int(scores.n.sel(variable="v0"))
    assert 0 < n < 30 and f"v0 on {n} " in str(rec[0].message)
    assert float(scores.cov95_low.sel(variable="v0")) == pytest.approx(geogpvae.validation.coverage_range(n, n)[0])
    assert float(scores.cov95_high.sel(variable="v0")) == 1.0
    big = make_gaussian_field((30, 30), n_vars=1, seed=4)
    _capture(monkeypatch, std=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough values (about 240 at share 0.3): nothing to say
        scores = geogpvae.validate(big, ["v0"], share=0.3, seed=1)
    assert int(scores.n.sel(variable="v0")) >= 30
    assert float(scores.cov95_low.sel(variable="v0")) < float(scores.cov95.sel(variable="v0")) <= float(
        scores.cov95_high.sel(variable="v0"))


def test_bad_shares_and_variables_too_small_to_hold_out_get_clear_errors():
    ds = make_gaussian_field((10, 10), n_vars=2, seed=0)
    for share in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(InputError, match="share must lie in"):
            geogpvae.validate(ds, ["v0"], share=share)
    two = np.full(ds.v1.shape, np.nan)
    two[0, :2] = [1.0, 2.0]
    tiny = ds.assign(v1=(ds.v1.dims, two))
    with pytest.raises(InputError, match="no value of v1 would be held out"):
        geogpvae.validate(tiny, ["v0", "v1"], share=0.05, neighbours=5, epochs=2)
    two[0, 1] = np.nan  # one value, which is always kept: no share can help
    single = ds.assign(v1=(ds.v1.dims, two))
    with pytest.raises(InputError, match="v1 has 1 observed value.*nothing can be held out; leave v1 out of vars"):
        geogpvae.validate(single, ["v0", "v1"], share=0.9, neighbours=5, epochs=2)


def test_a_real_run_scores_every_variable():
    ds = make_gaussian_field((16, 16), n_vars=2, seed=2)
    scores = geogpvae.validate(ds, neighbours=6, epochs=5, share=0.2)
    assert scores.variable.values.tolist() == ["v0", "v1"]
    assert (scores.n > 0).all() and np.isfinite(scores.rmse).all() and ((scores.cov95 >= 0) & (scores.cov95 <= 1)).all()


def test_shaped_gaps_follow_the_missing_values_and_complete_variables_get_a_random_share(monkeypatch):
    """With outages in v0 (whole runs of a series missing), ``gaps="shaped"`` holds out runs too,
    not isolated values; v1, complete, gets a random share."""
    rng = np.random.default_rng(0)
    t = np.arange(400.0)
    v0 = np.sin(t / 15) + 0.1 * rng.standard_normal(t.size)
    for start in (40, 150, 260, 330):
        v0[start:start + 20] = np.nan
    ds = xr.Dataset({"v0": ("time", v0), "v1": ("time", np.cos(t / 20))}, coords={"time": t})
    seen = _capture(monkeypatch)
    scores = geogpvae.validate(ds, ["v0", "v1"], share=0.1, gaps="shaped", neighbours=5)
    removed = {n: ds[n].notnull().values & seen["work"][n].isnull().values for n in ("v0", "v1")}
    for n in ("v0", "v1"):
        assert int(scores.n.sel(variable=n)) == removed[n].sum() > 0
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, removed["v0"].astype(int), 0]) != 0))[::2]
    assert runs.max() >= 5  # gaps, like the outages
    isolated = removed["v1"] & ~np.r_[False, removed["v1"][:-1]] & ~np.r_[removed["v1"][1:], False]
    assert isolated.sum() > 0.5 * removed["v1"].sum()  # the complete variable: at random
    assert scores.attrs["geogpvae_validation_gaps"] == "shaped"
    with pytest.raises(InputError, match="gaps must be"):
        geogpvae.validate(ds, ["v0"], gaps="bogus")


def test_an_imputed_output_is_refused(monkeypatch):
    """An output of impute has its holes filled with predictions: scoring it would score the model
    against itself."""
    ds = make_gaussian_field((10, 10), n_vars=1, seed=0)
    filled = ds.assign(v0_imputed=ds.v0.isnull().astype("int8"), v0=ds.v0.fillna(0.0))
    _capture(monkeypatch)
    with pytest.raises(InputError, match="already went through impute"):
        geogpvae.validate(filled, ["v0"], neighbours=5)


def test_a_log_modelled_variable_is_scored_in_log_space(monkeypatch):
    """Its predictive is Gaussian in log space: nll, cov95 and z2 are taken there (the log-space
    moments recovered from v and v_std); rmse stays in the data's units."""
    import geogpvae.api

    ds = make_gaussian_field((20, 20), n_vars=1, seed=5)
    ds["v0"] = np.exp(ds.v0)
    s, shift = 0.5, 0.3  # log-space std, and the log-space error of every prediction
    u = np.exp(s**2)

    seen = {}

    def fake(work, names, **_):
        seen["held"] = ds.v0.notnull().values & work.v0.isnull().values
        out = work.copy()
        pred = (ds.v0 * np.exp(shift)).where(work.v0.isnull(), work.v0)  # exp(mu), the median
        out["v0"] = pred.assign_attrs(geogpvae_transform="log", geogpvae_point_estimate="median")
        out["v0_std"] = xr.where(work.v0.isnull(), pred * np.sqrt(u * (u - 1)), 0.0)
        return out

    monkeypatch.setattr(geogpvae.api, "impute", fake)
    row = geogpvae.validate(ds, ["v0"], share=0.3, seed=2).sel(variable="v0")
    assert row.space.item() == "log"
    assert float(row.z2) == pytest.approx((shift / s) ** 2)
    assert float(row.cov95) == 1.0  # |z| = 0.6
    err = ds.v0.values[seen["held"]] * (np.exp(shift) - 1)  # in the data's units
    assert float(row.mae) == pytest.approx(float(np.mean(np.abs(err))))
    assert float(row.rmse) == pytest.approx(float(np.sqrt(np.mean(err**2))))


def test_random_held_out_values_on_clustered_gaps_come_with_a_note(monkeypatch, capsys):
    """The engine finds v0's outages clustered: random held-out values score a best case, and
    both the function and the command say so and name gaps='shaped'."""
    rng = np.random.default_rng(0)
    t = np.arange(300.0)
    v0 = np.sin(t / 15) + 0.1 * rng.standard_normal(t.size)
    for start in (40, 150, 230):
        v0[start:start + 25] = np.nan
    ds = xr.Dataset({"v0": ("time", v0)}, coords={"time": t})
    with pytest.warns(UserWarning, match=r"the gaps of v0 cluster .* gaps='shaped'"):
        scores = geogpvae.validate(ds, ["v0"], share=0.1, neighbours=5, epochs=3)
    assert scores.attrs["geogpvae_clustered_gaps"] == '["v0"]'
    from geogpvae.cli.validate import _table

    assert "note: the gaps of v0 cluster" in _table(["in.nc"], scores)
    scores.attrs["geogpvae_clustered_gaps"] = "[]"  # gaps at random: no note
    assert "note: the gaps" not in _table(["in.nc"], scores)


def test_places_never_observed_are_reported_once_with_the_users_count():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(3, 10, 12))
    v[:, 2:5, 3:6] = np.nan  # 9 places never observed
    ds = xr.Dataset({"sst": (("time", "lat", "lon"), v)},
                    coords={"time": np.datetime64("2020-01-01") + np.arange(3).astype("timedelta64[D]") * 30,
                            "lat": ("lat", np.linspace(10, 0, 10), {"units": "degrees_north"}),
                            "lon": ("lon", np.linspace(0, 11, 12), {"units": "degrees_east"})})
    with pytest.warns(UserWarning) as caught:
        geogpvae.validate(ds, ["sst"], share=0.2, neighbours=5, epochs=2)
    never = [str(w.message) for w in caught if "have no value at any" in str(w.message)]
    assert len(never) == 1 and never[0].startswith("9 of the 120")


@pytest.mark.parametrize("folds", [None, 3])
def test_a_heavy_tailed_variable_is_told_about_log_space_once(monkeypatch, folds):
    _capture(monkeypatch)  # the runs' own impute calls warn as a real impute would
    import geogpvae.api

    fake = geogpvae.api.impute

    def impute_that_prepares(work, names, **kwargs):
        geogpvae.GPVAEImputer(progress=False).prepare(work, names)  # where impute's warning comes from
        return fake(work, names, **kwargs)

    monkeypatch.setattr(geogpvae.api, "impute", impute_that_prepares)
    ds = make_gaussian_field((20, 20), n_vars=1, seed=4)
    ds["v0"] = np.exp(4 * ds.v0)
    with pytest.warns(UserWarning) as caught:
        geogpvae.validate(ds, ["v0"], share=0.2, folds=folds)
    told = [str(w.message) for w in caught if "orders of magnitude" in str(w.message)]
    assert len(told) == 1 and told[0].startswith("v0: positive values spanning")


def test_a_packed_input_with_bounds_in_codes_is_validated():
    """The thinned copy keeps the packing, so bounds given in codes are read in kelvin."""
    rng = np.random.default_rng(2)
    codes = rng.integers(-9000, -1000, size=(12, 12)).astype(np.int16)
    decoded = codes * 0.01 + 300.0
    ds = xr.Dataset({"t": (("y", "x"), decoded, {"units": "K", "valid_range": np.array([-10000, 0], np.int16)})},
                    coords={"y": np.arange(12.0), "x": np.arange(12.0)})
    ds.t.encoding = {"dtype": np.dtype("int16"), "scale_factor": 0.01, "add_offset": 300.0}
    scores = geogpvae.validate(ds, ["t"], share=0.2, neighbours=5, epochs=2)
    assert int(scores.n.sel(variable="t")) > 0


def test_crps_is_the_integral_of_the_squared_distance_between_the_cdf_and_the_step():
    from scipy.integrate import quad
    from scipy.stats import norm

    from geogpvae.validation import crps_gaussian

    for mean, std, y in [(0.0, 1.0, 0.0), (1.5, 0.3, 0.2), (-2.0, 4.0, 3.0), (10.0, 0.05, 10.01)]:
        left = quad(lambda t: norm.cdf(t, mean, std) ** 2, mean - 40 * std, y, limit=200)[0]
        right = quad(lambda t: (1 - norm.cdf(t, mean, std)) ** 2, y, mean + 40 * std, limit=200)[0]
        assert float(crps_gaussian(mean, std, y)) == pytest.approx(left + right, rel=1e-7, abs=1e-10)
    # a sharp predictive scores its absolute error; the vector form is elementwise
    assert float(crps_gaussian(1.0, 1e-9, 3.0)) == pytest.approx(2.0, rel=1e-6)
    np.testing.assert_allclose(crps_gaussian(np.zeros(3), np.ones(3), np.array([0.0, 1.0, -1.0])),
                               [crps_gaussian(0, 1, v) for v in (0.0, 1.0, -1.0)])


def test_validate_reports_the_crps_of_the_held_out_values(monkeypatch):
    from geogpvae.validation import crps_gaussian

    ds = make_gaussian_field((20, 20), n_vars=1, seed=4)
    truth = ds["v0"].copy()
    _capture(monkeypatch, mean_of=lambda n: truth.fillna(0.0) + 0.3, std=0.5)
    scores = geogpvae.validate(ds, ["v0"], share=0.3, seed=1)
    assert float(scores.crps.sel(variable="v0")) == pytest.approx(float(crps_gaussian(0.3, 0.5, 0.0)))


# ------------------------------------------------------------------ k-fold and spatial blocks
def _capture_all(monkeypatch):
    """Replace impute with a stub that records every run's input (and predicts 0, std 0.5)."""
    import geogpvae.api

    works = []

    def fake(work, names, **kwargs):
        works.append(work.copy(deep=True))
        out = work.copy()
        for n in names:
            out[n] = work[n].fillna(0.0)
            out[f"{n}_std"] = xr.where(work[n].isnull(), 0.5, 0.0)
        return out

    monkeypatch.setattr(geogpvae.api, "impute", fake)
    return works


def _removed(ds, works, name):
    given = ds[name].notnull().values
    return [given & w[name].isnull().values for w in works]


def test_k_folds_hold_out_every_observed_value_once(monkeypatch):
    ds = make_gaussian_field((20, 20), n_vars=2, missing=0.3, seed=3)
    works = _capture_all(monkeypatch)
    scores = geogpvae.validate(ds, ["v0", "v1"], folds=5, seed=2)
    assert len(works) == 5
    for n in ("v0", "v1"):
        removed = np.array(_removed(ds, works, n))
        np.testing.assert_array_equal(removed.sum(0), ds[n].notnull().values)  # each value once
        assert all(abs(r.sum() - removed.sum() / 5) <= 1 for r in removed)  # folds of equal size
        assert int(scores.n.sel(variable=n)) == int(ds[n].notnull().sum())
    assert scores.attrs["geogpvae_validation_folds"] == 5 and scores.attrs["geogpvae_validation_share"] == 0.2


def test_spatial_blocks_hold_out_whole_blocks(monkeypatch):
    ds = make_gaussian_field((24, 24), n_vars=2, missing=0.2, seed=1)
    works = _capture_all(monkeypatch)
    scores = geogpvae.validate(ds, ["v0", "v1"], gaps="blocks", folds=4, block_size=6, seed=0)
    assert scores.attrs["geogpvae_validation_block_size"] == 6
    blocks = (np.arange(24)[:, None] // 6) * 4 + np.arange(24)[None, :] // 6  # the grid in cell steps
    for n in ("v0", "v1"):
        observed = ds[n].notnull().values
        removed = _removed(ds, works, n)
        np.testing.assert_array_equal(np.sum(removed, 0), observed)
        for r in removed:  # a block is held out whole or not at all
            held_blocks = set(blocks[r])
            np.testing.assert_array_equal(r, observed & np.isin(blocks, list(held_blocks)))
            assert len(held_blocks) == 4  # 16 blocks dealt to 4 folds
    works.clear()
    geogpvae.validate(ds, ["v0"], gaps="blocks", share=0.2, seed=0)  # one run, blocks of the default size
    (removed,) = _removed(ds, works, "v0")
    assert 0.1 < removed.sum() / ds.v0.notnull().sum() < 0.35


def test_bad_fold_settings_are_refused_before_any_work(monkeypatch):
    ds = make_gaussian_field((12, 12), n_vars=1, seed=0)
    works = _capture_all(monkeypatch)
    for kwargs, message in [
        (dict(folds=1), "folds must be a whole number >= 2"),
        (dict(folds=2.5), "folds must be a whole number"),
        (dict(folds=3, gaps="shaped"), "gaps='shaped' holds out one set"),
        (dict(block_size=3.0), "block_size is for gaps='blocks'"),
        (dict(gaps="blocks", block_size=-1.0), "block_size must be a positive number"),
        (dict(gaps="blocks", folds=4, block_size=100.0), "fewer than folds=4"),
        (dict(folds=500), "fewer than folds=500"),
        (dict(gaps="bogus"), "gaps must be 'random', 'shaped' or 'blocks'"),
    ]:
        with pytest.raises(InputError, match=message):
            geogpvae.validate(ds, ["v0"], **kwargs)
    assert works == []


def test_spatial_cross_validation_end_to_end():
    ds = make_gaussian_field((16, 16), n_vars=2, missing=0.2, seed=6)
    scores = geogpvae.validate(ds, ["v0", "v1"], gaps="blocks", folds=2, neighbours=6, epochs=3)
    assert (scores.n.values == ds[["v0", "v1"]].notnull().sum().to_array().values).all()
    assert np.isfinite(scores.rmse.values).all() and np.isfinite(scores.crps.values).all()
