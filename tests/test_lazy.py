"""Dask-backed outputs (geogpvae/api_lazy.py): lazy prediction in blocks on any scheduler, a
distributed LocalCluster included, and imputed variables chunked like the input."""

from __future__ import annotations

import importlib.util
import threading

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.datasets import make_gaussian_field
from geogpvae.errors import InputError

dask = pytest.importorskip("dask")


@pytest.fixture(scope="module")
def fitted():
    ds = make_gaussian_field((16, 16), seed=0)
    imp = geogpvae.GPVAEImputer(neighbours=8, epochs=20, progress=False, encoder_hidden=(16, 16),
                                decoder_hidden=(16, 16), samples=8).fit(ds, ["v0", "v1"])
    grid = xr.Dataset(coords={"y": np.linspace(-0.1, 1.1, 23), "x": np.linspace(0, 1, 17)})
    for c in ("x", "y"):
        grid[c].attrs = dict(ds[c].attrs)
    return ds, imp, grid, imp.predict(grid)


def _same(a: xr.Dataset, b: xr.Dataset) -> None:
    """Same variables, attributes and values to float32 rounding (blocks run the networks in batches of
    other sizes; a wrong block, a shifted one or a race differs by far more)."""
    def timeless(attrs):
        return {k: v for k, v in attrs.items() if k != "history"}

    assert list(a.data_vars) == list(b.data_vars)
    xr.testing.assert_identical(xr.Dataset(attrs=timeless(a.attrs)), xr.Dataset(attrs=timeless(b.attrs)))
    for name in a.data_vars:
        xr.testing.assert_identical(a[name].copy(data=b[name].values), b[name])  # dims, coordinates, attributes
        np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-6, atol=1e-7)


def test_predict_in_blocks_is_lazy_and_equals_one_shot(fitted):
    _, imp, grid, eager = fitted
    lazy = imp.predict(grid, chunks={"y": 10, "x": 6})
    assert lazy.v0.chunks == ((10, 10, 3), (6, 6, 5)) and lazy.v1_std.chunks == lazy.v0.chunks
    _same(lazy.compute(scheduler="sync"), eager)
    _same(lazy.compute(scheduler="threads"), eager)  # blocks predicted from several threads at once


def test_a_chunked_template_sets_the_blocks(fitted):
    _, imp, grid, eager = fitted
    template = xr.DataArray(np.zeros((23, 17)), coords=grid.coords, dims=("y", "x")).chunk({"y": 8})
    lazy = imp.predict(template)
    assert lazy.v0.chunks == ((8, 8, 7), (17,))
    _same(lazy.compute(), eager)


def test_predict_on_a_distributed_cluster(fitted, tmp_path):
    """Worker processes predict the blocks, impute a chunked field and draw realisations; the results
    and their files equal the in-memory ones."""
    distributed = pytest.importorskip("distributed")
    zarr_installed = importlib.util.find_spec("zarr") is not None
    ds, imp, grid, eager = fitted
    draws = imp.simulate(ds, 6, seed=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  local_directory=tmp_path) as cluster, distributed.Client(cluster) as client:
        lazy = imp.predict(grid, chunks={"y": 12})
        _same(lazy.compute(), eager)
        np.testing.assert_array_equal(imp.simulate(ds.chunk(), 6, seed=1).v1.values, draws.v1.values)
        imputed = imp.impute(ds.chunk({"y": 8}))
        _same(imputed.compute(), imp.impute(ds))
        geogpvae.to_netcdf(imputed, tmp_path / "imputed.nc")
        geogpvae.to_netcdf(lazy, tmp_path / "lazy.nc")
        if zarr_installed:  # the workers write the blocks into one store; then two jobs fill one each
            geogpvae.to_zarr(lazy, tmp_path / "lazy.zarr")
            geogpvae.to_zarr(lazy, tmp_path / "parts.zarr", compute=False)
            halves = [imp.predict(grid.isel(y=slice(i, i + 12))) for i in range(0, grid.sizes["y"], 12)]
            client.gather([client.submit(geogpvae.to_zarr, part, tmp_path / "parts.zarr", region="auto")
                           for part in halves])
    if zarr_installed:
        one_shot = geogpvae.open_dataset(geogpvae.to_zarr(eager, tmp_path / "eager.zarr")).load()
        for store in ("lazy.zarr", "parts.zarr"):
            _same(geogpvae.open_dataset(tmp_path / store).load(), one_shot)
    geogpvae.to_netcdf(imp.impute(ds), tmp_path / "imputed_eager.nc")
    with xr.open_dataset(tmp_path / "imputed.nc") as back, xr.open_dataset(tmp_path / "imputed_eager.nc") as one_shot:
        assert back.v0_imputed.dtype == np.int8  # plain xarray reads the flags back as flags
        _same(back.load(), one_shot.load())
    geogpvae.to_netcdf(eager, tmp_path / "eager.nc")
    with xr.open_dataset(tmp_path / "lazy.nc") as back, xr.open_dataset(tmp_path / "eager.nc") as one_shot:
        _same(back.load(), one_shot.load())


def test_concurrent_predictions_from_threads_agree(fitted):
    _, imp, grid, eager = fitted
    results = [None] * 4

    def one(i):
        results[i] = imp.predict(grid)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in results:
        _same(out, eager)


def test_imputed_variables_come_back_chunked_like_the_input(fitted):
    ds, imp, _, _ = fitted
    chunked = ds.chunk({"y": 8, "x": 5})
    out = imp.impute(chunked)
    plain = imp.impute(ds)
    for name in ("v0", "v0_std", "v0_imputed", "v1", "v1_std", "v1_imputed"):
        assert out[name].chunks == ((8, 8), (5, 5, 5, 1)), name
    _same(out.compute(), plain)
    for name in ("v0", "v1"):  # observed values bit for bit
        observed = plain[f"{name}_imputed"].values == 0
        np.testing.assert_array_equal(out[name].values[observed], ds[name].values[observed])
        np.testing.assert_array_equal(out[f"{name}_imputed"].values, plain[f"{name}_imputed"].values)
    assert out.v2.chunks == chunked.v2.chunks  # passed through, still lazy


def test_a_chunked_input_is_predicted_block_by_block_when_computed(fitted, monkeypatch):
    """Nothing is predicted when impute returns; each block with cells of the field is one prediction
    of just its cells, however the training field is ordered."""
    from geogpvae import api_lazy

    ds, imp, _, _ = fitted
    calls, predict = [], api_lazy._predict_training_rows

    def counted(engine, order, rows):
        calls.append(np.asarray(rows if order is None else order[rows]))
        return predict(engine, order, rows)

    monkeypatch.setattr(api_lazy, "_predict_training_rows", counted)
    plain = imp.impute(ds)
    # the training field in another order, and read back as float32: its rows map to the training rows
    transposed = ds.transpose("x", "y").astype(np.float32).astype(np.float64).chunk({"x": 6, "y": 16})
    for chunked in (ds.chunk({"y": 6}), transposed):
        calls.clear()
        out = imp.impute(chunked)
        assert calls == []
        computed = out.compute(scheduler="sync")
        assert len(calls) == 3 and sorted(np.concatenate(calls).tolist()) == list(range(ds.sizes["y"] * ds.sizes["x"]))
        _same(computed.transpose(*plain.v0.dims), plain)


def test_a_new_chunked_field_is_imputed_at_the_call_and_chunked_like_it(fitted, monkeypatch):
    ds, imp, _, _ = fitted
    other = ds.copy(deep=True)
    other["v0"] = other.v0.where(np.arange(16)[None, :] % 3 != 0)  # other observed values: another field
    calls, predict = [], type(imp.engine_).predict

    def counted(engine, *args, **kwargs):
        calls.append(kwargs.get("rows"))
        return predict(engine, *args, **kwargs)

    monkeypatch.setattr(type(imp.engine_), "predict", counted)
    out = imp.impute(other.chunk({"y": 8}))
    assert calls == [None]  # the whole field, at the call
    assert out.v0.chunks == ((8, 8), (16,))
    _same(out.compute(), imp.impute(other))
    assert len(calls) == 2


def test_only_a_lazy_pass_through_variable_leaves_the_imputation_in_memory(fitted):
    ds, imp, _, _ = fitted
    mixed = ds.assign(v2=ds.v2.chunk({"y": 4}))
    out = imp.impute(mixed)
    assert out.v0.chunks is None and out.v1_std.chunks is None and out.v2.chunks == ((4, 4, 4, 4), (16,))
    _same(out, imp.impute(ds))


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_lazy_imputation_checks_its_fills_when_computed(fitted, monkeypatch, scheduler, tmp_path):
    """A block whose prediction is not finite fails when it is computed, as the one-shot path fails at the
    call, and a file being written from it is not left behind."""
    from geogpvae import api_lazy

    ds, imp, _, _ = fitted

    def broken(engine, order, rows):
        pred = engine.predict(rows=rows)
        pred.mean[:] = np.nan
        return pred

    monkeypatch.setattr(api_lazy, "_predict_training_rows", broken)
    out = imp.impute(ds.chunk({"y": 8}))
    with pytest.raises(ValueError, match="non-finite value"):
        out.compute(scheduler=scheduler)
    with dask.config.set(scheduler=scheduler), pytest.raises(ValueError, match="non-finite value"):
        geogpvae.to_netcdf(out, tmp_path / "filled.nc")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("chunks", "message"), [({"z": 4}, "not a dim"), ({"y": 0}, "whole number"),
                                                 ({"y": 2.5}, "whole number")])
def test_bad_chunks_are_refused(fitted, chunks, message):
    _, imp, grid, _ = fitted
    with pytest.raises(InputError, match=message):
        imp.predict(grid, chunks=chunks)


def test_scattered_new_sites_in_blocks(fitted):
    ds, imp, _, _ = fitted
    rng = np.random.default_rng(3)
    sites = xr.Dataset(coords={"x": ("site", rng.uniform(0, 1, 50)), "y": ("site", rng.uniform(0, 1, 50))})
    for c in ("x", "y"):
        sites[c].attrs = dict(ds[c].attrs)
    eager = imp.predict(sites)
    lazy = imp.predict(sites, chunks={"site": 16})
    assert lazy.v0.chunks == ((16, 16, 16, 2),)
    _same(lazy.compute(), eager)
