"""Everything checked before training, outputs that share no memory with inputs, and a full disk
that says so.

Outputs of :func:`geogpvae.impute`, :meth:`GPVAEImputer.impute` and :meth:`GPVAEImputer.predict`
are copies; longitudes beyond [-360, 360] are refused like latitudes beyond [-90, 90]; ``geogpvae
impute`` refuses an unwritable checkpoint folder, a disk without room for the output and names or
attributes NetCDF cannot hold before training, and a disk that fills up while writing ends in
"no space left on device: PATH" with nothing left behind. Training is tiny (a few epochs, small
networks) and is replaced by a failing stub wherever a refusal must come first.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

import geogpvae
from geogpvae import GPVAEImputer
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field
from geogpvae.errors import InputError

sys.path.insert(0, str(Path(__file__).parent / "cli"))
from cli_helpers import TINY, _error_line, _no_training, _write  # noqa: E402

#: tiny training through the API: the options of cli_helpers.SMALL
KW = {"neighbours": 4, "epochs": 2, "progress": False, "encoder_hidden": [8], "decoder_hidden": [8],
      "samples": 4, "calibrate": False}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)


# --------------------------------------------------------------------------- no aliasing
def _with_extras() -> xr.Dataset:
    ds = make_gaussian_field((10, 10), seed=0)
    dims = ds.v0.dims
    ds["extra"] = (dims, np.ones(ds.v0.shape), {"flags": [1, 2]})
    return ds.assign_coords(aux=(dims[0], np.arange(10.0)), run=np.int64(3))


def _assert_detached(out: xr.Dataset, ds: xr.Dataset) -> None:
    """No variable or coordinate of ``out`` shares memory with one of ``ds``."""
    shared = [
        (str(a), str(b))
        for a, va in out.variables.items()
        for b, vb in ds.variables.items()
        if np.shares_memory(np.asarray(va.values), np.asarray(vb.values))
    ]
    assert not shared, f"outputs share memory with inputs: {shared}"


@pytest.fixture(scope="module")
def fitted():
    ds = _with_extras()
    return ds, GPVAEImputer(**KW).fit(ds, ["v0", "v1"])


def test_impute_output_shares_no_memory_with_the_input():
    ds = _with_extras()
    before = ds.copy(deep=True)
    out = geogpvae.impute(ds, ["v0"], **KW)
    _assert_detached(out, ds)
    out["extra"].values[0, 0] = 42
    out["v1"].values[0, 0] = 42
    out["aux"].values[0] = 42
    out["extra"].attrs["flags"].append(3)
    xr.testing.assert_identical(ds, before)
    assert ds.extra.attrs["flags"] == [1, 2]


def test_imputer_impute_and_predict_share_no_memory(fitted):
    ds, imp = fitted
    before = ds.copy(deep=True)
    out = imp.impute(ds)
    _assert_detached(out, ds)
    out["extra"].values[0, 0] = 42
    xr.testing.assert_identical(ds, before)
    where = xr.Dataset(coords={"y": ds.y.values[:4].copy(), "x": ds.x.values[:3].copy()})
    where = where.assign_coords(aux=("y", np.arange(4.0)))
    predicted = imp.predict(where)
    _assert_detached(predicted, where)


def test_lazy_variables_stay_lazy_and_detached(tmp_path):
    ds = _with_extras()
    path = _write(ds, tmp_path / "in.nc")
    with geogpvae.open_dataset(path) as lazy:
        lazy.v1.values  # read into the input's cache: the output must not hold that array
        out = geogpvae.impute(lazy, ["v0"], **KW)
        assert not out.variables["v2"]._in_memory
        _assert_detached(out, lazy)


# --------------------------------------------------------------------------- coordinates
def _sites(lon: np.ndarray, lat: np.ndarray, **lon_attrs) -> xr.Dataset:
    rng = np.random.default_rng(0)
    v = rng.normal(size=lon.size)
    v[:5] = np.nan
    return xr.Dataset({"v": ("site", v)},
                      coords={"lon": ("site", lon, lon_attrs), "lat": ("site", lat)})


@pytest.mark.parametrize(
    "lon, attrs",
    [(np.linspace(4.0e5, 5.0e5, 30), {}),  # metres of a projection, called lon
     (np.linspace(0.0, 1000.0, 30), {"units": "degrees_east"})],  # degrees beyond a full turn
    ids=["projected", "beyond-360"],
)
def test_longitudes_beyond_360_are_refused(no_training, lon, attrs):
    ds = _sites(lon, np.linspace(40.0, 50.0, 30), **attrs)
    with pytest.raises(InputError, match=r"longitude 'lon' has values outside \[-360, 360\] degrees") as err:
        geogpvae.impute(ds, **KW)
    text = str(err.value)
    assert f"max {lon.max():g}" in text and "projection_x_coordinate" in text
    assert "ds.rename({'lon': 'x', 'lat': 'y'})" in text


def test_projected_latitudes_say_what_to_do(no_training):
    ds = _sites(np.linspace(5.0, 6.0, 30), np.linspace(4.0e6, 5.0e6, 30))
    with pytest.raises(InputError, match=r"latitude 'lat' has values outside \[-90, 90\]") as err:
        geogpvae.impute(ds, **KW)
    assert "projection_y_coordinate" in str(err.value)


def test_predict_refuses_longitudes_beyond_360():
    ds = _sites(np.linspace(5.0, 6.0, 30), np.linspace(45.0, 46.0, 30))
    imp = GPVAEImputer(**KW).fit(ds)
    where = xr.Dataset(coords={"lon": ("site", [5.5, 4.5e5]), "lat": ("site", [45.5, 45.5])})
    with pytest.raises(InputError, match="longitude 'lon' has values outside"):
        imp.predict(where)


def test_longitudes_within_360_still_work():
    ds = _sites(np.linspace(-350.0, 350.0, 30), np.linspace(-80.0, 80.0, 30))
    out = geogpvae.impute(ds, **KW)
    assert np.isfinite(out.v.values).all()


# --------------------------------------------------------------------------- the output in memory
def test_a_variable_whose_name_is_not_text_is_refused_before_training(no_training):
    ds = make_gaussian_field((8, 8), seed=0).rename({"v0": 5})
    with pytest.raises(InputError, match=r"variable 5 has a name that is not text .*ds.rename\(\{5: '5'\}\)"):
        geogpvae.impute(ds, **KW)


# --------------------------------------------------------------------------- what NetCDF can hold
def _writable_cases() -> dict[str, xr.Dataset]:
    def base() -> xr.Dataset:
        return xr.Dataset({"v": (("y", "x"), np.zeros((2, 3)))},
                          coords={"x": np.arange(3.0), "y": np.arange(2.0)})

    cases = {}
    values = {"nested": [[1, 2], [3, 4]], "ragged": [[1], [2, 3]], "set": {1, 2}, "complex": 1 + 2j,
              "datetime": np.datetime64("2000-01-01"), "big": 2**70, "list-none": [1, None],
              "surrogate": "\ud800", "bytes-array": np.array([b"a"]), "2-D": np.zeros((2, 2)),
              "mixed": [1, "a"], "empty": [], "none": None, "dict": {"a": [1]}, "bools": [True, False],
              "uint64": np.uint64(3), "2**63": 2**63, "text": "é", "numbers": (1.5, 2)}
    for key, value in values.items():
        ds = base()
        ds.v.attrs["a"] = value
        cases[f"attr-{key}"] = ds
    for name in ["a/b", "", " x", "x ", "a\x01b", "é", "a b", "_x"]:
        ds = base()
        ds[name] = ds.v
        cases[f"var-{name!r}"] = ds
        ds = base()
        ds.v.attrs[name] = 1
        cases[f"attr-name-{name!r}"] = ds
    for dtype in [complex, "V8", np.longdouble, np.float16, bool, "M8[ns]", "U3"]:
        ds = base()
        ds["w"] = (("y", "x"), np.zeros((2, 3), dtype=dtype))
        cases[f"dtype-{np.dtype(dtype)}"] = ds
    for items in (["a", {}, "b"], ["a", None, float("nan")], ["a", 1.5, "b"]):
        ds = base()
        ds["o"] = ("x", np.array(items, dtype=object))
        cases[f"objects-{items!r}"] = ds
    ds = base().rename_dims({"x": "x/y"})
    cases["dim-'x/y'"] = ds
    return cases


_CASES = _writable_cases()


@pytest.mark.parametrize("case", sorted(_CASES))
def test_check_writable_refuses_what_to_netcdf_refuses(tmp_path, case):
    from geogpvae.fields.encoding import check_writable

    ds = _CASES[case]
    try:
        geogpvae.to_netcdf(ds, tmp_path / "out.nc")
        written = True
    except (ValueError, TypeError, AttributeError, RuntimeError, UnicodeError):
        written = False
    if written:
        check_writable(ds)
    else:
        with pytest.raises(InputError, match="the output cannot be written to NetCDF"):
            check_writable(ds)


# --------------------------------------------------------------------------- geogpvae impute, before training
@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    return _write(make_gaussian_field((16, 16), seed=0), tmp_path_factory.mktemp("checks") / "grid.nc")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_read_only_checkpoint_folder_is_refused_before_training(monkeypatch, capsys, grid, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    folder.chmod(0o555)  # read-only for a user; root writes anyway, so the file system refuses too
    real_open = os.open

    def read_only(path, *args, **kwargs):
        if Path(os.fspath(path)).parent == folder:
            raise PermissionError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    out = tmp_path / "out.nc"
    try:
        code = main(["impute", str(grid), str(out), *TINY, "--checkpoint-dir", str(folder)])
    finally:
        folder.chmod(0o755)
    assert code == 2
    line = _error_line(capsys)
    assert f"cannot write in --checkpoint-dir {folder}" in line and "Read-only file system" in line
    assert not out.exists() and not list(folder.iterdir())


def test_not_enough_free_space_is_refused_before_training(monkeypatch, capsys, grid, tmp_path):
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    out = tmp_path / "out.nc"
    assert main(["impute", str(grid), str(out), *TINY]) == 2
    line = _error_line(capsys)
    assert f"not enough free space on {tmp_path}: need about " in line and "have 1000 B" in line
    assert not out.exists() and not _leftovers(tmp_path)


@pytest.mark.parametrize("extra", ["--save-model", "--checkpoint-dir"])
def test_no_room_for_the_model_file_or_a_checkpoint_is_refused_before_training(monkeypatch, capsys, grid,
                                                                                tmp_path, extra):
    from geogpvae.cli import impute as command

    # the output alone would fit (counted as nothing here); the model file or two checkpoints do not
    monkeypatch.setattr(command, "output_bytes", lambda *args: 0)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    out, where = tmp_path / "out.nc", tmp_path / ("model.pt" if extra == "--save-model" else "ckpt")
    assert main(["impute", str(grid), str(out), *TINY]) == 1  # without them it goes on to train
    assert "refused before training" in _error_line(capsys)
    assert main(["impute", str(grid), str(out), *TINY, extra, str(where)]) == 2
    line = _error_line(capsys)
    assert "not enough free space on " in line and "have 1000 B" in line, line
    assert not out.exists() and not (tmp_path / "model.pt").exists()


def _spoiled(kind: str):
    """An opener of the inputs that adds what NetCDF cannot hold (as a non-NetCDF reader might)."""
    from geogpvae.cli import impute as command

    real = command._open

    def spoil(*args, **kwargs):
        ds = real(*args, **kwargs)
        if kind == "complex":
            ds["c"] = ds.v0.fillna(0.0) * (1 + 1j)
        elif kind == "nested":
            ds.v1.attrs["levels"] = [[1, 2], [3, 4]]
        else:
            ds["a/b"] = ds.v2
        return ds

    return spoil


@pytest.mark.parametrize(
    "kind, named",
    [("complex", "variable 'c' is complex (complex128)"),
     ("nested", "attribute 'levels' of variable 'v1'"),
     ("slash", "variable 'a/b' holds '/'")],
)
def test_what_netcdf_cannot_hold_is_refused_before_training(monkeypatch, capsys, grid, tmp_path, kind, named):
    from geogpvae.cli import impute as command

    monkeypatch.setattr(command, "_open", _spoiled(kind))
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    out = tmp_path / "out.nc"
    assert main(["impute", str(grid), str(out), *TINY]) == 2
    line = _error_line(capsys)
    assert "the output cannot be written to NetCDF" in line and named in line
    assert not out.exists()


# --------------------------------------------------------------------------- a disk that fills up
_TORCH_FULL = ("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file "
               "data/0: file write failed")


def _disk_fills(monkeypatch, fault: str) -> None:
    """The device reports no free space from the first failed write on, which fails as ``fault``
    says: ``"enospc"`` (OSError), ``"hdf-error"`` (netCDF's vague RuntimeError) or ``"torch-model"``."""
    import geogpvae.fields.io as io

    full = {"now": False}
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=0) if full["now"] else real(p))

    def fails(*args, **kwargs):
        full["now"] = True
        if fault == "enospc":
            raise OSError(errno.ENOSPC, "No space left on device")
        raise RuntimeError(_TORCH_FULL if fault == "torch-model" else "NetCDF: HDF error")

    if fault == "torch-model":
        monkeypatch.setattr(torch, "save", fails)
    else:
        monkeypatch.setattr(io, "_write_netcdf", fails)


@pytest.mark.parametrize("fault", ["enospc", "hdf-error", "torch-model"])
def test_a_full_disk_while_writing_says_so_and_leaves_nothing(monkeypatch, capsys, grid, tmp_path, fault):
    _disk_fills(monkeypatch, fault)
    out, model = tmp_path / "out.nc", tmp_path / "model.pt"
    assert main(["impute", str(grid), str(out), *TINY, "--save-model", str(model)]) == 1
    line = _error_line(capsys)
    target = model if fault == "torch-model" else out
    assert f"no space left on device: {target}" in line and "JobFailure" not in line and "Errno" not in line
    assert not out.exists() and not model.exists() and not _leftovers(tmp_path)


@pytest.mark.parametrize("fault", ["enospc", "hdf-error"])
def test_a_full_disk_under_to_netcdf_says_so_and_leaves_nothing(monkeypatch, tmp_path, fault):
    _disk_fills(monkeypatch, fault)
    target = tmp_path / "out.nc"
    with pytest.raises(OSError, match=f"no space left on device: {re.escape(str(target))}") as info:
        geogpvae.to_netcdf(make_gaussian_field((4, 4), seed=0), target)
    assert info.value.errno == errno.ENOSPC
    assert not target.exists() and not _leftovers(tmp_path)


def test_a_full_disk_under_save_says_so_and_leaves_nothing(monkeypatch, tmp_path):
    from geogpvae.fields import torch_files

    imputer = geogpvae.GPVAEImputer(neighbours=4, epochs=1, progress=False).fit(make_gaussian_field((6, 6), seed=0))
    monkeypatch.setattr(torch_files, "_open_staged", lambda tmp: os.open("/dev/full", os.O_WRONLY))
    target = tmp_path / "model.pt"
    with pytest.raises(OSError, match=f"no space left on device: {re.escape(str(target))}") as info:
        imputer.save(target)
    assert info.value.errno == errno.ENOSPC
    assert not target.exists() and not _leftovers(tmp_path)


def test_a_full_disk_at_a_checkpoint_says_so(monkeypatch, capsys, grid, tmp_path):
    folder = tmp_path / "ckpt"

    def save_fails(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", save_fails)
    out = tmp_path / "out.nc"
    code = main(["impute", str(grid), str(out), *TINY, "--checkpoint-dir", str(folder),
                 "--checkpoint-every", "1"])
    assert code == 1
    line = _error_line(capsys)
    assert f"no space left on device: {folder}" in line and "checkpoint of epoch 1 was not written" in line
    assert not out.exists() and not list(folder.iterdir())
