"""Tests of the data loaders and the synthetic field generator (geogpvae.datasets).

Tests marked ``data`` read the real Jura / SPE10 files through the ``data_dir`` fixture and
skip when they are absent. Every other test builds its own small files under ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from geogpvae.datasets import (
    REGISTRY,
    ChecksumError,
    DataFile,
    DataFileNotFoundError,
    available,
    data_home,
    decode_flags,
    load_jura,
    load_jura_grid,
    load_spe10,
    make_gaussian_field,
    registry,
    verify_file,
)
from geogpvae.datasets import jura as jura_mod
from geogpvae.datasets import spe10 as spe10_mod

data = pytest.mark.data
JURA_SITE_FILES = ("jura_pred.csv", "jura_val.csv", "jura_pred_lonlat.csv",
                   "jura_val_lonlat.csv")


@pytest.fixture(scope="module")
def jura(data_dir: Path) -> xr.Dataset:
    return load_jura(data_dir)


@pytest.fixture(scope="module")
def spe10(data_dir: Path) -> xr.Dataset:
    return load_spe10(data_dir=data_dir)


def _copy_jura(src: Path, dst: Path, names=JURA_SITE_FILES) -> Path:
    """Copy the small Jura CSVs to ``dst/jura`` (writable copies); return that folder."""
    folder = dst / "jura"
    folder.mkdir(parents=True)
    for n in names:
        shutil.copyfile(src / "jura" / n, folder / n)
    return folder


def _entry_for(path: Path, key: str, **kw) -> DataFile:
    """A registry entry matching the current content of ``path``."""
    dataset, name = key.split("/")
    content = path.read_bytes()
    fields = dict(size=len(content), sha256=hashlib.sha256(content).hexdigest(),
                  git_blob_sha1=None, description="test file")
    fields.update(kw)
    return DataFile(dataset, name, **fields)


# ------------------------------------------------------------------------------- Jura


@data
def test_jura_sites_and_split(jura: xr.Dataset) -> None:
    assert dict(jura.sizes) == {"site": 359}
    split = jura["split"].values
    assert (split[:259] == "prediction").all() and (split[259:] == "validation").all()
    assert set(jura.data_vars) == {"Cd", "Co", "Cr", "Cu", "Ni", "Pb", "Zn", "Landuse", "Rock"}
    # first rows of each file, in file order
    assert (float(jura.x[0]), float(jura.y[0]), float(jura.Cd[0])) == (2.386, 3.077, 1.74)
    assert (float(jura.x[259]), float(jura.y[259]), float(jura.Zn[259])) == (2.672, 3.558, 65.2)
    for m in jura_mod.JURA_METALS:
        assert jura[m].dtype == np.float64 and not jura[m].isnull().any()


@data
def test_jura_coordinates_and_attributes(jura: xr.Dataset) -> None:
    assert jura.x.attrs["units"] == "km" and jura.x.attrs["axis"] == "X"
    assert jura.y.attrs["units"] == "km" and jura.y.attrs["axis"] == "Y"
    assert jura.x.attrs["standard_name"] == "projection_x_coordinate"
    assert jura.lon.attrs == {**jura.lon.attrs, "units": "degrees_east",
                              "standard_name": "longitude"}
    assert jura.lat.attrs == {**jura.lat.attrs, "units": "degrees_north",
                              "standard_name": "latitude"}
    assert jura.Cd.attrs["units"] == "mg kg-1"
    assert jura.Cd.attrs["long_name"] == "cadmium concentration in topsoil"
    assert jura.Pb.attrs["long_name"] == "lead concentration in topsoil"
    assert "Goovaerts" in jura.attrs["references"] and "1997" in jura.attrs["references"]
    assert {"title", "source"} <= set(jura.attrs)
    pred = jura.isel(site=slice(0, 259))
    assert float(pred.x.min()) == 0.626 and float(pred.x.max()) == 4.920
    assert float(pred.y.min()) == 0.580 and float(pred.y.max()) == 5.690


@data
def test_jura_known_means(jura: xr.Dataset) -> None:
    pred = jura.isel(site=slice(0, 259))
    val = jura.isel(site=slice(259, None))
    assert float(pred.Cd.mean()) == pytest.approx(1.30908, abs=5e-6)
    assert float(val.Cd.mean()) == pytest.approx(1.23426, abs=5e-6)
    assert float(pred.Zn.mean()) == pytest.approx(75.078, abs=5e-4)
    expected = {"Co": 9.3026, "Cr": 35.070, "Cu": 23.728, "Ni": 19.730, "Pb": 53.917}
    for m, mean in expected.items():
        assert float(pred[m].mean()) == pytest.approx(mean, abs=6e-4), m
    assert float(val.Pb.max()) == 300.0 and float(pred.Cd.max()) == 5.129


@data
def test_jura_flags_decode(jura: xr.Dataset, data_dir: Path) -> None:
    lu, rock = jura.Landuse, jura.Rock
    assert lu.dtype == np.int8 and rock.dtype == np.int8
    np.testing.assert_array_equal(lu.attrs["flag_values"], [1, 2, 3, 4])
    assert lu.attrs["flag_meanings"] == "Forest Pasture Meadow Tillage"
    np.testing.assert_array_equal(rock.attrs["flag_values"], [1, 2, 3, 4, 5])
    assert rock.attrs["flag_meanings"] == "Argovian Kimmeridgian Sequanian Portlandian Quaternary"

    labels = decode_flags(jura.Landuse)
    assert "flag_values" not in labels.attrs and labels.sizes == lu.sizes
    pred_lu = dict(zip(*np.unique(labels.values[:259], return_counts=True)))
    assert pred_lu == {"Meadow": 165, "Pasture": 56, "Forest": 33, "Tillage": 5}
    rock_lab = decode_flags(jura.Rock).values
    assert dict(zip(*np.unique(rock_lab[259:], return_counts=True))) == {
        "Kimmeridgian": 39, "Sequanian": 26, "Argovian": 23, "Quaternary": 9, "Portlandian": 3}
    assert rock_lab[0] == "Sequanian" and rock_lab[259] == "Quaternary"

    # gstat's prediction.dat / validation.dat carry the integer codes: same codes, same rows
    for name, sl in (("prediction_dat.csv", slice(0, 259)), ("validation_dat.csv",
                                                               slice(259, None))):
        raw = registry._read_verified(data_dir / "jura" / name, f"jura/{name}")
        cols = jura_mod._read_csv(raw, name, jura_mod._JURA_COLUMNS)
        np.testing.assert_array_equal(np.array(cols["Landuse"], int), lu.values[sl])
        np.testing.assert_array_equal(np.array(cols["Rock"], int), rock.values[sl])
        np.testing.assert_array_equal(np.array(cols["Cd"], float), jura.Cd.values[sl])


@data
def test_jura_lonlat_plausible(jura: xr.Dataset) -> None:
    lon, lat = jura.lon.values, jura.lat.values
    assert abs(lon.mean() - 6.85) < 0.03 and abs(lat.mean() - 47.14) < 0.03
    assert lon.min() > 6.75 and lon.max() < 6.95 and lat.min() > 47.08 and lat.max() < 47.20
    # the local grid is (nearly) aligned with east/north
    assert np.corrcoef(jura.x, lon)[0, 1] > 0.999 and np.corrcoef(jura.y, lat)[0, 1] > 0.999
    # ~ 73 km per degree of longitude at 47 N, 111 km per degree of latitude
    assert np.polyfit(lon, jura.x, 1)[0] == pytest.approx(111.32 * np.cos(np.radians(47.14)),
                                                         rel=0.02)
    assert np.polyfit(lat, jura.y, 1)[0] == pytest.approx(111.2, rel=0.02)


@data
def test_jura_netcdf_roundtrip(jura: xr.Dataset, tmp_path: Path) -> None:
    jura.to_netcdf(tmp_path / "jura.nc")
    with xr.open_dataset(tmp_path / "jura.nc") as back:
        np.testing.assert_array_equal(back.Rock.values, jura.Rock.values)
        assert back.Rock.attrs["flag_meanings"] == jura.Rock.attrs["flag_meanings"]
        assert (back.split.values == jura.split.values).all()


@data
def test_jura_grid(data_dir: Path) -> None:
    g = load_jura_grid(data_dir)
    assert dict(g.sizes) == {"node": 5957}
    assert set(g.data_vars) == {"Landuse", "Rock"} and {"x", "y", "lon", "lat"} <= set(g.coords)
    assert (float(g.x.min()), float(g.x.max())) == (0.3, 5.1)
    assert (float(g.y.min()), float(g.y.max())) == (0.1, 5.9)
    assert len(np.unique(g.x)) == 97 and len(np.unique(g.y)) == 117
    steps = np.round(g.x.values / 0.05, 6)
    np.testing.assert_array_equal(steps, np.round(steps))  # on the 0.05 km grid
    assert decode_flags(g.Rock).values[0] == "Sequanian"
    assert set(np.unique(g.Landuse.values)) <= {1, 2, 3, 4}
    assert abs(float(g.lon.mean()) - 6.85) < 0.03 and abs(float(g.lat.mean()) - 47.14) < 0.03
    assert g.x.attrs["units"] == "km"


# --------------------------------------------------------------------------- checksums


@data
def test_corrupted_byte_is_caught(data_dir: Path, tmp_path: Path) -> None:
    folder = _copy_jura(data_dir, tmp_path)
    load_jura(tmp_path)  # a good copy loads
    f = folder / "jura_pred.csv"
    raw = bytearray(f.read_bytes())
    raw[100] = ord("7") if raw[100] != ord("7") else ord("8")
    f.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError) as info:
        load_jura(tmp_path)
    err = info.value
    msg = str(err)
    expected = REGISTRY["jura/jura_pred.csv"].sha256
    assert "jura_pred.csv" in msg and expected in msg and err.found in msg
    assert err.algorithm == "sha256" and err.found != expected and len(err.found) == 64
    assert "datasets/README.md" in msg and "gstat" in msg


@data
def test_wrong_size_is_caught(data_dir: Path, tmp_path: Path) -> None:
    folder = _copy_jura(data_dir, tmp_path)
    with open(folder / "jura_val_lonlat.csv", "ab") as fh:
        fh.write(b"\n")
    with pytest.raises(ChecksumError, match="4834 bytes; expected 4833") as info:
        load_jura(tmp_path)
    assert info.value.algorithm == "size"


@data
def test_lonlat_keys_must_match(data_dir: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy_jura(data_dir, tmp_path)
    f = folder / "jura_val_lonlat.csv"
    lines = f.read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]  # swap two sites
    f.write_text("".join(lines))
    monkeypatch.setitem(REGISTRY, "jura/jura_val_lonlat.csv",
                        _entry_for(f, "jura/jura_val_lonlat.csv"))
    with pytest.raises(ValueError, match="jura_val_lonlat.csv does not match jura_val.csv"):
        load_jura(tmp_path)


def test_verification_is_cached_per_file_version(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "spe10" / "spe10.npz"
    f.parent.mkdir()
    f.write_bytes(b"0123456789" * 1000)
    monkeypatch.setitem(REGISTRY, "spe10/spe10.npz", _entry_for(f, "spe10/spe10.npz"))
    monkeypatch.setattr(registry, "_DIGESTS", {})
    calls = []
    real = registry._new_hash
    monkeypatch.setattr(registry, "_new_hash", lambda *a: calls.append(a) or real(*a))
    assert verify_file(f) == f
    assert verify_file(f) == f
    assert len(calls) == 1  # hashed once
    f.write_bytes(b"x123456789" * 1000)  # same size, new content
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    with pytest.raises(ChecksumError, match="spe10.npz"):
        verify_file(f)
    assert len(calls) == 2


def test_npz_checksum_checked_before_reading(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "spe10" / "spe10.npz"
    f.parent.mkdir()
    np.savez(f, phi=np.zeros((2, 3, 4)), kx=np.zeros((2, 3, 4)), ky=np.zeros((2, 3, 4)),
             kz=np.zeros((2, 3, 4)))
    good = _entry_for(f, "spe10/spe10.npz")
    monkeypatch.setitem(REGISTRY, "spe10/spe10.npz",
                        _entry_for(f, "spe10/spe10.npz", sha256="0" * 64))
    with pytest.raises(ChecksumError) as info:
        load_spe10(data_dir=tmp_path)
    assert "0" * 64 in str(info.value) and good.sha256 in str(info.value)
    assert "por_perm_case2a.zip" in str(info.value)
    # right checksum, wrong content: the shape check speaks
    monkeypatch.setitem(REGISTRY, "spe10/spe10.npz", good)
    with pytest.raises(ValueError, match=r"expected float64 \(85, 220, 60\)"):
        load_spe10(data_dir=tmp_path)


def test_git_blob_checksum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "spe10" / "spe_perm.dat"
    f.parent.mkdir()
    f.write_bytes(b"hello\n")
    # `git hash-object` of "hello\n", a well-known value
    entry = DataFile("spe10", "spe_perm.dat", None, None,
                     "ce013625030ba8dba906f756967f9e9ca394464a", "test")
    monkeypatch.setitem(REGISTRY, "spe10/spe_perm.dat", entry)
    verify_file(f)
    f.write_bytes(b"hellO\n")
    with pytest.raises(ChecksumError) as info:
        verify_file(f)
    assert info.value.algorithm == "git-blob-sha1"
    assert "ce013625030ba8dba906f756967f9e9ca394464a" in str(info.value)


@data
def test_real_spe_phi_git_blob(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # check the git blob path on the real file, with its sha256 hidden
    entry = REGISTRY["spe10/spe_phi.dat"]
    assert entry.git_blob_sha1 == "3f4c10b173eb9d4a7eba44ca2069b86b9868639b"
    monkeypatch.setitem(REGISTRY, "spe10/spe_phi.dat",
                        DataFile("spe10", "spe_phi.dat", entry.size, None,
                                 entry.git_blob_sha1, "test"))
    monkeypatch.setattr(registry, "_DIGESTS", {})
    verify_file(data_dir / "spe10" / "spe_phi.dat")


def test_unregistered_file(tmp_path: Path) -> None:
    f = tmp_path / "other.csv"
    f.write_text("a\n")
    with pytest.raises(KeyError, match="not a registered data file"):
        verify_file(f)


# --------------------------------------------------------------- missing files, data dir


def test_missing_directory_is_explained(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    with pytest.raises(DataFileNotFoundError) as info:
        load_jura(nowhere)
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert str(nowhere / "jura") in msg and "does not exist" in msg
    assert "gstat" in msg and "data(jura)" in msg and "GEOGPVAE_DATA_DIR" in msg
    with pytest.raises(DataFileNotFoundError) as info:
        load_spe10(data_dir=nowhere)
    msg = str(info.value)
    assert str(nowhere / "spe10") in msg
    assert "por_perm_case2a.zip" in msg and "https://www.spe.org/web/csp/datasets/set02.htm" in msg


def test_a_data_directory_that_is_a_file_is_named_so(tmp_path: Path, monkeypatch) -> None:
    afile = tmp_path / "datasets.tar"
    afile.write_text("not a folder\n")
    monkeypatch.setenv("GEOGPVAE_DATA_DIR", str(afile))
    with pytest.raises(DataFileNotFoundError, match=r"the data directory .*datasets.tar is a file, not a folder"):
        load_jura()


def test_missing_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "jura").mkdir()
    (tmp_path / "jura" / "jura_pred.csv").write_text("x\n")
    with pytest.raises(DataFileNotFoundError, match="jura_val_lonlat.csv"):
        load_jura(tmp_path)
    (tmp_path / "spe10").mkdir()
    (tmp_path / "spe10" / "spe_phi.dat").write_text("1\n")
    with pytest.raises(DataFileNotFoundError, match=r"spe10.npz \(or spe_perm.dat\)"):
        load_spe10(data_dir=tmp_path)
    with pytest.raises(DataFileNotFoundError, match="spe10.npz"):
        load_spe10(data_dir=tmp_path, variables=["porosity"], source="npz")


def test_data_dir_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env, repo, cache, arg = (tmp_path / n for n in ("env", "repo", "cache", "arg"))
    monkeypatch.setattr(registry, "_REPO_DATA_DIR", repo)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("GEOGPVAE_DATA_DIR", str(env))
    (repo / "jura").mkdir(parents=True)
    (repo / "jura" / "jura_pred.csv").write_text("x\n")
    assert data_home("jura", data_dir=arg) == arg / "jura"  # argument first
    assert data_home(data_dir=str(arg)) == arg
    assert data_home("jura") == env / "jura"  # then the environment
    monkeypatch.delenv("GEOGPVAE_DATA_DIR")
    assert data_home("jura") == repo / "jura"  # then a repository folder holding jura files
    assert data_home("spe10") == cache / "geogpvae" / "spe10"  # not spe10 files: the cache
    assert data_home() == repo
    monkeypatch.setenv("GEOGPVAE_DATA_DIR", "")  # empty counts as unset
    assert data_home("jura") == repo / "jura"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_home("spe10") == tmp_path / "home" / ".cache" / "geogpvae" / "spe10"
    with pytest.raises(ValueError, match="unknown data set"):
        data_home("mnist")
    # the loader follows the same order: it reports the repository folder
    with pytest.raises(DataFileNotFoundError, match="repository's datasets/ folder"):
        load_jura()


def test_available(tmp_path: Path) -> None:
    assert available(tmp_path) == {"jura": None, "jura_grid": None, "spe10": None, "gstat": None}
    (tmp_path / "jura").mkdir()
    for n in JURA_SITE_FILES:
        (tmp_path / "jura" / n).write_text("x\n")
    (tmp_path / "spe10").mkdir()
    (tmp_path / "spe10" / "spe_phi.dat").write_text("1\n")
    assert available(tmp_path) == {"jura": tmp_path / "jura", "jura_grid": None, "spe10": None, "gstat": None}
    (tmp_path / "spe10" / "spe_perm.dat").write_text("1\n")
    assert available(tmp_path)["spe10"] == tmp_path / "spe10"


@data
def test_available_real(data_dir: Path) -> None:
    found = available(data_dir)
    assert {k: found[k] for k in ("jura", "jura_grid", "spe10")} == {
        "jura": data_dir / "jura", "jura_grid": data_dir / "jura", "spe10": data_dir / "spe10"}
    assert found["gstat"] in (None, data_dir / "gstat")


# ------------------------------------------------------------------------------- SPE10


@data
def test_spe10_full_resolution(spe10: xr.Dataset) -> None:
    assert dict(spe10.sizes) == {"z": 85, "y": 220, "x": 60}
    assert list(spe10.data_vars) == ["porosity", "kx", "ky", "kz"]
    for v in spe10.data_vars.values():
        assert v.dims == ("z", "y", "x") and v.dtype == np.float64
    phi = spe10.porosity.values
    assert int((phi == 0).sum()) == 27579
    assert int((phi[:35] == 0).sum()) == 4275 and int((phi[35:] == 0).sum()) == 23304
    assert (phi.min(), phi.max()) == (0.0, 0.5)
    assert phi.mean() == pytest.approx(0.17060, abs=5e-6)
    assert phi[0, 0, 0] == 0.184778  # first value of spe_phi.dat
    np.testing.assert_array_equal(spe10.kx.values, spe10.ky.values)
    ratio = spe10.kz.values / spe10.kx.values
    assert int(np.isclose(ratio, 1e-4, rtol=1e-4).sum()) == 851697
    assert int(np.isclose(ratio, 0.3, rtol=1e-4).sum()) == 270303
    assert spe10.porosity.attrs["units"] == "1"
    assert all(spe10[k].attrs["units"] == "9.869233e-16 m2" for k in ("kx", "ky", "kz"))
    assert all("(mD)" in spe10[k].attrs["long_name"] for k in ("kx", "ky", "kz"))
    assert spe10.x.attrs["standard_name"] == "projection_x_coordinate"
    assert spe10.y.attrs["standard_name"] == "projection_y_coordinate"
    assert "Tarbert" in spe10.attrs["formations"] and "Upper Ness" in spe10.attrs["formations"]


@data
def test_spe10_coordinates(spe10: xr.Dataset) -> None:
    np.testing.assert_allclose(spe10.x.values, (np.arange(60) + 0.5) * 6.096)
    np.testing.assert_allclose(spe10.y.values, (np.arange(220) + 0.5) * 3.048)
    np.testing.assert_allclose(spe10.z.values, (np.arange(85) + 0.5) * 0.6096)
    assert float(spe10.x[-1]) + 3.048 == pytest.approx(60 * 20 * 0.3048)  # 1200 ft wide
    assert spe10.z.attrs["positive"] == "down" and spe10.z.attrs["axis"] == "Z"
    assert spe10.x.attrs["units"] == spe10.y.attrs["units"] == spe10.z.attrs["units"] == "m"
    assert spe10.layer.dims == ("z",)
    np.testing.assert_array_equal(spe10.layer.values, np.arange(1, 86))
    assert int(spe10.layer.values[np.argmin(spe10.z.values)]) == 1  # layer 1 on top
    form = spe10.formation.values
    assert (form[:35] == "Tarbert").all() and (form[35:] == "Upper Ness").all()
    # Upper Ness is the channelised, lower-mean-porosity formation
    assert spe10.porosity.values[35:].mean() < spe10.porosity.values[:35].mean()


@data
def test_spe10_downsample(spe10: xr.Dataset, data_dir: Path) -> None:
    half = load_spe10(2, data_dir)
    assert dict(half.sizes) == {"z": 43, "y": 110, "x": 30}
    for v in ("porosity", "kx", "kz"):
        np.testing.assert_array_equal(half[v].values, spe10[v].values[::2, ::2, ::2])
        assert half[v].values.flags.c_contiguous
    np.testing.assert_allclose(half.x.values, (np.arange(0, 60, 2) + 0.5) * 6.096)
    np.testing.assert_allclose(half.z.values, (np.arange(0, 85, 2) + 0.5) * 0.6096)
    np.testing.assert_array_equal(half.layer.values, np.arange(1, 86, 2))
    assert (half.formation.values == np.where(half.layer <= 35, "Tarbert", "Upper Ness")).all()
    assert half.attrs["downsample"] == 2
    assert list(load_spe10(5, data_dir, variables=["kz"]).data_vars) == ["kz"]


def test_spe10_bad_arguments(tmp_path: Path) -> None:
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="downsample"):
            load_spe10(bad, tmp_path)
    with pytest.raises(TypeError, match="downsample"):
        load_spe10(1.5, tmp_path)
    with pytest.raises(ValueError, match="variables"):
        load_spe10(data_dir=tmp_path, variables=["permeability"])
    with pytest.raises(ValueError, match="source"):
        load_spe10(data_dir=tmp_path, source="zip")


@data
def test_spe10_dat_porosity_equals_npz(spe10: xr.Dataset, data_dir: Path) -> None:
    dat = load_spe10(data_dir=data_dir, variables=["porosity"], source="dat")
    assert list(dat.data_vars) == ["porosity"]
    np.testing.assert_array_equal(dat.porosity.values, spe10.porosity.values)
    assert "spe_phi.dat" in dat.attrs["source"]


@data
def test_spe10_dat_pair_end_to_end(spe10: xr.Dataset, data_dir: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The .dat pair path, with a stand-in spe_perm.dat built from the real spe_phi.dat.

    Its three blocks are phi, -phi and phi with the layers in reverse order, all exact, so
    block order, sign and z orientation are all checked.
    """
    folder = tmp_path / "spe10"
    folder.mkdir()
    phi_dat = data_dir / "spe10" / "spe_phi.dat"
    (folder / "spe_phi.dat").symlink_to(phi_dat)  # no copy
    phi_text = phi_dat.read_bytes()
    neg = b"-" + phi_text.replace(b"\t", b"\t-").replace(b"\t-\r\n", b"\t\r\n-")
    neg = neg[:-1] if neg.endswith(b"-") else neg
    lines = phi_text.split(b"\r\n")[:-1]
    per_layer = 60 * 220 // 6
    flipped = b"".join(
        b"\r\n".join(lines[k * per_layer : (k + 1) * per_layer]) + b"\r\n"
        for k in reversed(range(85))
    )
    text = phi_text + neg + flipped
    (folder / "spe_perm.dat").write_bytes(text)
    blob = hashlib.sha1(b"blob %d\0" % len(text) + text).hexdigest()
    monkeypatch.setitem(REGISTRY, "spe10/spe_perm.dat",
                        DataFile("spe10", "spe_perm.dat", None, None, blob, "stand-in"))
    dat = load_spe10(data_dir=tmp_path)  # no npz there: the .dat pair is read
    assert "spe_perm.dat" in dat.attrs["source"] and "spe_phi.dat" in dat.attrs["source"]
    phi = spe10.porosity.values
    np.testing.assert_array_equal(dat.porosity.values, phi)
    np.testing.assert_array_equal(dat.kx.values, phi)
    np.testing.assert_array_equal(dat.ky.values, -phi)
    np.testing.assert_array_equal(dat.kz.values, phi[::-1])
    half = load_spe10(2, tmp_path, variables=["kz", "ky"])
    assert list(half.data_vars) == ["kz", "ky"] and "spe_phi.dat" not in half.attrs["source"]
    np.testing.assert_array_equal(half.kz.values, phi[::-1][::2, ::2, ::2])
    np.testing.assert_array_equal(half.ky.values, -phi[::2, ::2, ::2])


def test_perm_block_parser_on_synthetic_text() -> None:
    shape = (2, 3, 4)  # (nz, ny, nx)
    n = 24
    # value encodes (block, z, y, x); file order is x fastest, then y, then z, block by block
    vals = [b * 1000 + z * 100 + y * 10 + x + 0.25
            for b in range(3) for z in range(2) for y in range(3) for x in range(4)]
    lines = ["".join(f"{v:g}        \t" for v in vals[i : i + 6]) for i in range(0, 3 * n, 6)]
    text = ("\r\n".join(lines) + "\r\n").encode()
    blocks = spe10_mod._parse_spe10_blocks(text, 3, shape)
    assert blocks.shape == (3, 2, 3, 4)
    assert blocks[0, 0, 0, 0] == 0.25 and blocks[0, 0, 0, 1] == 1.25
    assert blocks[0, 0, 1, 0] == 10.25 and blocks[0, 1, 0, 0] == 100.25
    assert blocks[2, 1, 2, 3] == 2123.25
    np.testing.assert_array_equal(spe10_mod._parse_spe10_blocks(text, 3, shape, name="t"),
                                  spe10_mod._parse_numbers(text, 72, "t", chunk=5).reshape(3, *shape))
    with pytest.raises(ValueError, match="found 72 values, expected 96"):
        spe10_mod._parse_spe10_blocks(text, 4, shape, name="perm")
    with pytest.raises(ValueError, match="more than the expected 48"):
        spe10_mod._parse_spe10_blocks(text, 2, shape, name="perm")
    with pytest.raises(ValueError, match="perm: could not convert"):
        spe10_mod._parse_spe10_blocks(text.replace(b"100.25", b"1OO.25"), 3, shape, name="perm")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=60),
       st.integers(1, 40), st.sampled_from([" ", "\t", "\r\n", "  \t"]))
def test_parse_numbers_any_chunking(values: list[float], chunk: int, sep: str) -> None:
    text = sep.join(map(repr, values)).encode()
    out = spe10_mod._parse_numbers(text, len(values), "t", chunk=chunk)
    np.testing.assert_array_equal(out, np.array(values, dtype=float))


# --------------------------------------------------------------------- synthetic fields


@pytest.mark.parametrize("shape, dims", [((50,), ("x",)), ((12, 16), ("y", "x")),
                                         ((5, 6, 7), ("z", "y", "x")),
                                         ((3, 4, 5, 6), ("t", "z", "y", "x"))])
def test_gaussian_field_grid_shapes(shape, dims) -> None:
    ds = make_gaussian_field(shape, n_vars=2, seed=3)
    assert tuple(ds.sizes) == dims and tuple(ds.sizes.values()) == shape
    assert list(ds.data_vars) == ["v0", "v1"]
    for d, n in zip(dims, shape):
        c = ds[d].values
        assert c[0] == 0.0 and c[-1] == 1.0 and (np.diff(c) > 0).all() and len(c) == n
        assert ds[d].attrs["units"] == "km"
    assert ds.x.attrs["axis"] == "X"
    assert ds.v0.dims == dims and ds.v0.dtype == np.float64


def test_gaussian_field_defaults_and_custom_dims() -> None:
    ds = make_gaussian_field()
    assert dict(ds.sizes) == {"y": 64, "x": 64} and list(ds.data_vars) == ["v0", "v1", "v2"]
    ds = make_gaussian_field((8, 9), dims=("lat", "lon"), names=["a", "b"], n_vars=2,
                             extent=(2.0, 5.0), units="km")
    assert dict(ds.sizes) == {"lat": 8, "lon": 9} and list(ds.data_vars) == ["a", "b"]
    assert float(ds.lon[-1]) == 5.0 and float(ds.lat[-1]) == 2.0
    assert ds.lon.attrs["units"] == "km"


def test_gaussian_field_seeding() -> None:
    a = make_gaussian_field((20, 20), seed=7)
    b = make_gaussian_field((20, 20), seed=7)
    c = make_gaussian_field((20, 20), seed=8)
    xr.testing.assert_identical(a, b)
    assert not np.array_equal(np.isnan(a.v0.values), np.isnan(c.v0.values))
    assert a.attrs["seed"] == 7


def test_gaussian_field_missing_fraction() -> None:
    ds = make_gaussian_field((40, 40), missing=0.3, seed=1)
    frac = np.mean([ds[v].isnull().mean() for v in ds.data_vars])
    assert abs(frac - 0.3) < 0.02
    none = make_gaussian_field((16, 16), missing=0.0, seed=1)
    assert not any(none[v].isnull().any() for v in none.data_vars)
    full = make_gaussian_field((40, 40), missing=0.0, fully_missing=0.25, seed=2)
    all_nan = np.all([full[v].isnull().values for v in full.data_vars], axis=0)
    any_nan = np.any([full[v].isnull().values for v in full.data_vars], axis=0)
    assert abs(all_nan.mean() - 0.25) < 0.03
    np.testing.assert_array_equal(all_nan, any_nan)  # holes only where whole sites drop


def test_gaussian_field_truth() -> None:
    ds, truth = make_gaussian_field((30, 40), missing=0.4, seed=5, return_truth=True)
    assert set(truth.data_vars) == set(ds.data_vars)
    for c in ds.coords:
        xr.testing.assert_identical(truth[c], ds[c])
    for v in ds.data_vars:
        assert not truth[v].isnull().any()
        obs = ~ds[v].isnull()
        np.testing.assert_array_equal(ds[v].values[obs], truth[v].values[obs])
        assert 0.2 < float(truth[v].std()) < 3.0  # roughly unit variance
    # the variables share latent structure: strongly correlated
    r = np.corrcoef(truth.v0.values.ravel(), truth.v1.values.ravel())[0, 1]
    assert abs(r) > 0.2


def test_gaussian_field_lengthscale_controls_smoothness() -> None:
    def roughness(ls: float) -> float:
        _, t = make_gaussian_field((400,), n_vars=1, n_latent=1, lengthscale=ls, noise=0.0,
                                   nonlinear=0.0, seed=0, return_truth=True)
        return float(np.mean(np.abs(np.diff(t.v0.values))))

    assert roughness(0.02) > 5 * roughness(0.3)


def test_gaussian_field_scattered() -> None:
    ds, truth = make_gaussian_field(n_points=300, dims=("x", "y", "z"), extent=(1, 2, 3),
                                    seed=4, return_truth=True)
    assert dict(ds.sizes) == {"site": 300}
    assert set(ds.coords) == {"x", "y", "z"} and ds.z.attrs["axis"] == "Z"
    for d, e in zip("xyz", (1, 2, 3)):
        c = ds[d].values
        assert c.min() >= 0 and c.max() <= e and c.max() > 0.9 * e
    assert abs(float(ds.v0.isnull().mean()) - 0.5) < 0.1
    assert not truth.v2.isnull().any()
    two = make_gaussian_field(n_points=50, seed=4)
    assert set(two.coords) == {"x", "y"} and two.v0.dims == ("site",)
    xr.testing.assert_identical(two, make_gaussian_field(n_points=50, seed=4))


def test_gaussian_field_netcdf_roundtrip(tmp_path: Path) -> None:
    ds = make_gaussian_field((6, 7), seed=0)
    ds.to_netcdf(tmp_path / "f.nc")
    with xr.open_dataset(tmp_path / "f.nc") as back:
        xr.testing.assert_allclose(back, ds)


def test_gaussian_field_bad_arguments() -> None:
    with pytest.raises(ValueError, match="not both"):
        make_gaussian_field((4, 4), n_points=10)
    with pytest.raises(ValueError, match="1 to 4"):
        make_gaussian_field((2, 2, 2, 2, 2))
    with pytest.raises(ValueError, match="do not match"):
        make_gaussian_field((4, 4), dims=("x",))
    with pytest.raises(ValueError, match="names"):
        make_gaussian_field((4, 4), names=["a"])
    with pytest.raises(ValueError, match="missing"):
        make_gaussian_field((4, 4), missing=1.0)
    with pytest.raises(ValueError, match="lengthscale"):
        make_gaussian_field((4, 4), lengthscale=(0.1, 0.2, 0.3))
    with pytest.raises(ValueError, match="kernel"):
        make_gaussian_field((4, 4), kernel="cubic")
