"""Zarr stores (geogpvae/fields/zarr_io.py): round trips, atomic whole writes, region writes
that fill one store in parts, damaged stores refused, and the command line on stores."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field
from geogpvae.fields.zarr_io import open_zarr

pytest.importorskip("zarr")


@pytest.fixture(scope="module")
def imputed():
    ds = make_gaussian_field((16, 12), n_vars=2, missing=0.3, seed=4)
    domain = xr.DataArray(np.arange(12) < 10, dims="x")
    return geogpvae.impute(ds, ["v0", "v1"], neighbours=6, epochs=2, mask=domain, progress=False)


def _same_values(a: xr.Dataset, b: xr.Dataset) -> None:
    assert set(a.variables) == set(b.variables)
    for name in a.variables:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=str(name))


def _fail_after_writing(monkeypatch, message: str) -> None:
    """Make every ``Dataset.to_zarr`` write its store, then fail with ``OSError(message)``."""
    real = xr.Dataset.to_zarr

    def failing(self, store, **kwargs):
        real(self, store, **kwargs)
        raise OSError(message)

    monkeypatch.setattr(xr.Dataset, "to_zarr", failing)


def test_a_store_reads_back_bit_for_bit_and_flags_stay_int8(imputed, tmp_path):
    path = geogpvae.to_zarr(imputed, tmp_path / "out.zarr")
    assert path == tmp_path / "out.zarr" and os.listdir(tmp_path) == ["out.zarr"]  # no staging left
    back = geogpvae.open_dataset(path)
    assert back["v0"].chunks is not None  # lazy
    _same_values(back.load(), imputed)
    assert back.attrs["history"] == imputed.attrs["history"] and back.attrs["Conventions"].startswith("CF-")
    assert back["v0_imputed"].attrs["flag_meanings"] == "observed imputed no_value"
    plain = xr.open_zarr(path)  # plain xarray: the flags as int8, -127 where there is no value
    assert plain["v0_imputed"].dtype == np.int8 and (plain["v0_imputed"].values == -127).any()


def test_the_chunks_of_a_netcdf_input_are_kept(tmp_path):
    ds = make_gaussian_field((12, 10), n_vars=1, seed=0)
    ds.to_netcdf(tmp_path / "in.nc", encoding={"v0": {"chunksizes": (4, 5), "zlib": True}})
    with geogpvae.open_dataset(tmp_path / "in.nc") as read:
        geogpvae.to_zarr(read, tmp_path / "out.zarr")
        geogpvae.to_zarr(read, tmp_path / "given.zarr", encoding={"v0": {"chunks": (6, 10)}})
    assert open_zarr(tmp_path / "out.zarr")["v0"].encoding["chunks"] == (4, 5)
    assert open_zarr(tmp_path / "given.zarr")["v0"].encoding["chunks"] == (6, 10)
    with pytest.raises(ValueError, match="encoding names kx"):
        geogpvae.to_zarr(ds, tmp_path / "bad.zarr", encoding={"kx": {"chunks": (6, 10)}})
    assert not (tmp_path / "bad.zarr").exists()


def test_an_existing_store_is_kept_and_a_failed_write_leaves_nothing(imputed, tmp_path, monkeypatch):
    target = tmp_path / "out.zarr"
    geogpvae.to_zarr(imputed, target)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        geogpvae.to_zarr(imputed, target)
    geogpvae.to_zarr(imputed.assign(v0=imputed.v0 + 1), target, overwrite=True)
    np.testing.assert_array_equal(open_zarr(target)["v0"].values, imputed.v0.values + 1)

    _fail_after_writing(monkeypatch, "disk went away")
    with pytest.raises(OSError, match="disk went away"):
        geogpvae.to_zarr(imputed, target, overwrite=True)
    with pytest.raises(OSError, match="disk went away"):
        geogpvae.to_zarr(imputed, tmp_path / "new.zarr")
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]  # no new store, no staging folder
    np.testing.assert_array_equal(open_zarr(target)["v0"].values, imputed.v0.values + 1)  # the old one whole


def test_region_writes_fill_a_store_made_without_its_data(imputed, tmp_path):
    target = tmp_path / "out.zarr"
    geogpvae.to_zarr(imputed.chunk({"y": 8}), target, compute=False)
    empty = open_zarr(target)
    assert (empty["v0_imputed"].values == -127).all() and np.isnan(empty["v0"].values).all()
    assert empty.attrs["history"] == imputed.attrs["history"]
    geogpvae.to_zarr(imputed.isel(y=slice(8, 16)), target, region="auto")
    half = open_zarr(target)
    assert (half["v0_imputed"].values[:8] == -127).all()
    np.testing.assert_array_equal(half["v0"].values[8:], imputed.v0.values[8:])
    geogpvae.to_zarr(imputed.isel(y=slice(0, 8)), target, region={"y": slice(0, 8)})
    _same_values(open_zarr(target).load(), imputed)


def test_region_writes_that_would_corrupt_or_do_not_fit_are_refused(imputed, tmp_path):
    target = tmp_path / "out.zarr"
    with pytest.raises(FileNotFoundError, match="no such Zarr store"):
        geogpvae.to_zarr(imputed, target, region="auto")
    geogpvae.to_zarr(imputed.chunk({"y": 8}), target, compute=False)
    before = open_zarr(target).load()
    cases = [
        (imputed.isel(y=slice(4, 12)), "auto", r"y=4:12 cuts through chunks of .* multiples of 8"),
        (imputed.isel(y=[0, 2]), "auto", "not a contiguous run"),
        (imputed.assign_coords(y=imputed.y + 100).isel(y=slice(0, 8)), "auto", "not in the store's y"),
        (imputed.isel(y=slice(0, 8)).assign(extra=imputed.v0.isel(y=slice(0, 8))), "auto", "holds no variable extra"),
        (imputed.isel(y=slice(0, 8)), "everywhere", 'region must be "auto"'),
        (imputed, "auto", "covers the whole store"),
    ]
    for part, region, message in cases:
        with pytest.raises(ValueError, match=message):
            geogpvae.to_zarr(part, target, region=region)
    _same_values(open_zarr(target).load(), before)  # nothing was written


def test_damaged_stores_are_refused_with_their_name(imputed, tmp_path):
    target = tmp_path / "out.zarr"
    geogpvae.to_zarr(imputed, target)
    (target / "zarr.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"cannot read .*out\.zarr as a Zarr store"):
        geogpvae.open_dataset(target)
    (tmp_path / "plain.zarr").mkdir()
    with pytest.raises(ValueError, match="is not a Zarr store"):
        geogpvae.open_dataset(tmp_path / "plain.zarr")
    with pytest.raises(FileNotFoundError, match="no such Zarr store"):
        geogpvae.open_dataset(tmp_path / "missing.zarr")


def test_the_command_line_reads_and_writes_stores(tmp_path, capsys):
    ds = make_gaussian_field((12, 10), n_vars=2, missing=0.3, seed=2)
    geogpvae.to_zarr(ds, tmp_path / "in.zarr")
    options = ["--epochs", "2", "--neighbours", "6", "--option", "threads=1", "-q"]
    args = ["impute", str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr"), *options]
    assert main(args[:-1]) == 0
    assert "chunk by chunk (1 chunk)" in capsys.readouterr().err  # a store opens chunked: predicted while written
    out = open_zarr(tmp_path / "out.zarr")
    assert out["v0_imputed"].dtype == np.int8 and int(out["v0"].isnull().sum()) == 0
    geogpvae.to_netcdf(ds, tmp_path / "in.nc")
    assert main(["impute", str(tmp_path / "in.nc"), str(tmp_path / "eager.nc"), *options]) == 0
    with xr.open_dataset(tmp_path / "eager.nc") as eager:  # the same run from a file, predicted at once
        xr.testing.assert_allclose(out.v0.load(), eager.v0.load(), rtol=1e-6, atol=1e-7)
        xr.testing.assert_equal(out.v1_imputed.load(), eager.v1_imputed.load())
    assert "geogpvae_version" in out.attrs
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err  # an existing store is kept
    (tmp_path / "folder").mkdir()
    assert main(["impute", str(tmp_path / "folder"), str(tmp_path / "x.nc"), "-q"]) != 0
    assert "neither a NetCDF file nor a Zarr store" in capsys.readouterr().err
    assert json.loads((tmp_path / "out.zarr" / "zarr.json").read_text())["zarr_format"] == 3


def test_several_stores_join_into_one_field_as_files_do(imputed, tmp_path, capsys):
    for i, rows in enumerate((slice(0, 6), slice(6, 16))):
        geogpvae.to_zarr(imputed.isel(y=rows), tmp_path / f"part{i}.zarr")
    for given in ([tmp_path / "part0.zarr", tmp_path / "part1.zarr"], str(tmp_path / "part*.zarr")):
        joined = geogpvae.open_dataset(given, concat_dim="y")
        _same_values(joined.load(), imputed)
    assert geogpvae.open_dataset(str(tmp_path / "part*.zarr")).sizes == imputed.sizes  # by coordinates
    geogpvae.to_netcdf(imputed, tmp_path / "whole.nc")
    with pytest.raises(ValueError, match="mix Zarr stores and NetCDF files"):
        geogpvae.open_dataset([tmp_path / "part0.zarr", tmp_path / "whole.nc"])
    with pytest.raises(FileNotFoundError, match="no such Zarr store"):
        geogpvae.open_dataset([tmp_path / "part0.zarr", tmp_path / "absent.zarr"])
    with pytest.raises(FileNotFoundError, match="no Zarr store matches"):
        geogpvae.open_dataset(str(tmp_path / "none*.zarr"))
    # joined chunks of 6 and 10 rows: rechunked so that Zarr can hold them
    geogpvae.to_zarr(geogpvae.open_dataset(given, concat_dim="y"), tmp_path / "again.zarr")
    _same_values(open_zarr(tmp_path / "again.zarr").load(), imputed)
    raw = make_gaussian_field((16, 12), n_vars=2, missing=0.3, seed=4)
    ins = []
    for i, rows in enumerate((slice(0, 6), slice(6, 16))):
        ins.append(str(geogpvae.to_zarr(raw.isel(y=rows), tmp_path / f"raw{i}.zarr")))
    assert main(["impute", *ins, str(tmp_path / "filled.nc"), "--epochs", "2", "--neighbours", "6", "-q"]) == 0
    with xr.open_dataset(tmp_path / "filled.nc") as out:
        assert out.sizes["y"] == 16 and int(out.v0.isnull().sum()) == 0
        seen = raw.v0.notnull().values
        np.testing.assert_array_equal(out.v0.values[seen], raw.v0.values[seen])


@pytest.fixture()
def memory_url(request):
    """A fresh store URL on fsspec's in-memory filesystem (what s3://, gs:// ... go through)."""
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = f"/geogpvae-test/{request.node.name}"
    yield f"memory://{root}/out.zarr", fs, f"{root}/out.zarr"
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_a_remote_store_is_written_whole_and_reads_back(imputed, memory_url):
    url, fs, root = memory_url
    assert geogpvae.to_zarr(imputed, url) == url
    back = geogpvae.open_dataset(url)
    _same_values(back.load(), imputed)
    assert "geogpvae_write_incomplete" not in back.attrs
    with pytest.raises(FileExistsError, match="overwrite=True"):
        geogpvae.to_zarr(imputed, url)
    geogpvae.to_zarr(imputed.assign(v0=imputed.v0 + 1), url, overwrite=True)
    np.testing.assert_array_equal(open_zarr(url)["v0"].values, imputed.v0.values + 1)
    with pytest.raises(ValueError, match="storage_options are for a store at a URL"):
        geogpvae.to_zarr(imputed, "local.zarr", storage_options={"anon": True})


@pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")
def test_a_failed_remote_write_leaves_nothing_and_a_stopped_one_is_refused(imputed, memory_url, monkeypatch):
    """Object stores cannot rename: a failure removes what was written, and a store whose writer
    was killed (still marked incomplete) is refused when read."""
    url, fs, root = memory_url
    _fail_after_writing(monkeypatch, "connection reset")
    with pytest.raises(OSError, match="connection reset"):
        geogpvae.to_zarr(imputed, url)
    monkeypatch.undo()
    assert not fs.exists(root)
    # a writer killed before it finished: the store keeps its mark
    import zarr

    geogpvae.to_zarr(imputed, url)
    zarr.open_group(url, mode="r+").attrs["geogpvae_write_incomplete"] = "yes"
    zarr.consolidate_metadata(url)
    with pytest.raises(ValueError, match="incomplete: a geogpvae write into it did not finish"):
        open_zarr(url)


def test_region_writes_fill_a_remote_store(imputed, memory_url):
    url, _, _ = memory_url
    geogpvae.to_zarr(imputed.chunk({"y": 8}), url, compute=False)
    geogpvae.to_zarr(imputed.isel(y=slice(8, 16)), url, region="auto")
    geogpvae.to_zarr(imputed.isel(y=slice(0, 8)), url, region={"y": slice(0, 8)})
    _same_values(open_zarr(url).load(), imputed)


def test_the_command_line_writes_remote_stores(tmp_path, memory_url, capsys):
    """impute and simulate write to a store at a URL; an existing one is kept, and a NetCDF name at
    a URL is refused before any training."""
    url, _, root = memory_url
    ds = make_gaussian_field((10, 8), n_vars=1, missing=0.3, seed=5)
    geogpvae.to_netcdf(ds, tmp_path / "in.nc")
    args = ["impute", str(tmp_path / "in.nc"), url, "--epochs", "2", "--neighbours", "5", "-q"]
    assert main(args) == 0
    out = open_zarr(url)
    assert int(out["v0"].isnull().sum()) == 0 and out["v0_imputed"].dtype == np.int8
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    sims = url.replace("out.zarr", "sims.zarr")
    assert main(["simulate", str(tmp_path / "in.nc"), sims, "-n", "5", "--epochs", "2", "--neighbours", "5", "-q"]) == 0
    assert open_zarr(sims)["v0"].sizes["realization"] == 5
    assert main(["impute", str(tmp_path / "in.nc"), url.replace(".zarr", ".nc"), "-q"]) == 2
    assert "name it *.zarr" in capsys.readouterr().err
    before = open_zarr(url).attrs["history"]
    assert main([*args, "--skip-existing"]) == 0 and open_zarr(url).attrs["history"] == before  # not redone
    model = str(tmp_path / "m.pt")
    assert main([*args, "--overwrite", "--save-model", url.replace("out.zarr", "m.pt")]) == 2
    assert "write it to a local path" in capsys.readouterr().err
    assert main([*args, "--overwrite", "--save-model", model]) == 0
    grid = xr.Dataset(coords={"y": ds.y.values, "x": ds.x.values})
    for c in ("x", "y"):
        grid[c].attrs = dict(ds[c].attrs)
    geogpvae.to_netcdf(grid, tmp_path / "grid.nc")
    on_grid = url.replace("out.zarr", "grid.zarr")
    predict = ["predict", model, str(tmp_path / "grid.nc"), on_grid, "-q"]
    assert main([*predict, "--template", "--chunks", "y=5"]) == 0
    assert main([*predict, "--region", "y=0:5"]) == 0 and main([*predict, "--region", "y=5:10"]) == 0
    filled = open_zarr(on_grid)
    assert int(filled["v0"].isnull().sum()) == 0


def test_replacing_a_remote_store_may_read_from_it_and_a_racing_writer_is_left_alone(imputed, memory_url,
                                                                                     monkeypatch):
    url, fs, root = memory_url
    geogpvae.to_zarr(imputed, url)
    read = geogpvae.open_dataset(url)  # lazy: the new store is computed from the old one
    geogpvae.to_zarr(read.assign(v0=read.v0 + 1), url, overwrite=True)
    np.testing.assert_array_equal(open_zarr(url)["v0"].values, imputed.v0.values + 1)
    assert fs.ls(root.rsplit("/", 1)[0], detail=False) == [root]  # no staging store left
    other = url.replace("out.zarr", "other.zarr")
    real = xr.Dataset.to_zarr

    def racing(self, store, **kwargs):  # another job creates the store just before this one writes
        real(imputed.assign(v0=imputed.v0 * 0 + 7.0), store, mode="w-", zarr_format=3, consolidated=True)
        return real(self, store, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_zarr", racing)
    with pytest.raises(FileExistsError, match="created by another writer"):
        geogpvae.to_zarr(imputed, other)
    monkeypatch.undo()
    assert (open_zarr(other)["v0"].values[np.isfinite(imputed.v0.values)] == 7.0).all()  # theirs, whole
