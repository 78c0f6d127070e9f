"""Integrity of the files the package writes and reads back, and safety of their temporary files.

Model files and checkpoints carry a checksum (with the package version and a format tag); a
damaged, truncated or altered one is refused with one line naming the file and what failed, and
the values in them are checked (counters, shapes, finite numbers). Files of earlier versions,
without a checksum, still load. Temporary files are never followed through a link or swapped for
another file unnoticed, and a replaced output's setuid, setgid and sticky bits are not copied.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile

import numpy as np
import pytest
import torch
import xarray as xr

import geogpvae
from geogpvae.cli import jobs
from geogpvae.datasets import make_gaussian_field
from geogpvae.engine.core import GPVAEEngine
from geogpvae.errors import UnreadableFileError
from geogpvae.fields import io, torch_files

KW = {"neighbours": 4, "epochs": 1, "progress": False}


# --------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def field():
    return make_gaussian_field((8, 8), seed=0)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, field):
    path = tmp_path_factory.mktemp("model") / "model.pt"
    geogpvae.GPVAEImputer(**KW).fit(field).save(path)
    return path


@pytest.fixture(scope="module")
def snapshot():
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 2)), rng.normal(size=(40, 2))
    y[rng.random(y.shape) < 0.3] = np.nan
    return GPVAEEngine(neighbours=4, epochs=2, progress=False).fit(x, y).checkpoint()


IDENTITY = jobs.job_identity([], ["a", "b"], {"epochs": 2}, "data")


def _data_start(raw: bytes, info: zipfile.ZipInfo) -> int:
    at = info.header_offset
    return at + 30 + int.from_bytes(raw[at + 26:at + 28], "little") + int.from_bytes(raw[at + 28:at + 30], "little")


def _flip(path, n_bytes: int, mask: int = 0xFF) -> None:
    """Flip bits of ``n_bytes`` bytes in the middle of the largest tensor record of a torch file."""
    with zipfile.ZipFile(path) as archive:
        info = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    middle = _data_start(raw, info) + info.file_size // 2 - n_bytes // 2
    for i in range(middle, middle + n_bytes):
        raw[i] ^= mask
    path.write_bytes(bytes(raw))


def _alter(path) -> None:
    """Change a byte of the largest tensor record and write the archive again with right CRCs."""
    with zipfile.ZipFile(path) as archive:
        entries = [(i.filename, archive.read(i)) for i in archive.infolist()]
    largest = max((n for n, _ in entries if "/data/" in n), key=lambda n: len(dict(entries)[n]))
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries:
            if name == largest:
                data = data[:4] + bytes([data[4] ^ 0x10]) + data[5:]
            archive.writestr(name, data)


def _model_with(saved_model, tmp_path, change):
    """A model file whose state ``change`` edited, saved with a valid checksum."""
    state = torch.load(saved_model, weights_only=True)
    change(state)
    path = tmp_path / "edited.pt"
    torch_files.atomic_torch_save(state, path, overwrite=True)
    return path


def _refused_model(path, pattern):
    with pytest.raises(UnreadableFileError) as info:
        geogpvae.GPVAEImputer.load(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message, message
    assert re.search(pattern, message), message
    assert "positive definite" not in message
    return message


def _checkpoint_with(snapshot, tmp_path, change):
    """A checkpoint of ``snapshot`` as ``change`` edited it, saved with a valid checksum."""
    path = tmp_path / "job.ckpt"
    jobs.save_checkpoint(path, snapshot, IDENTITY)
    payload = torch.load(path, weights_only=True)
    change(payload)
    torch_files.atomic_torch_save(payload, path, overwrite=True)
    return path


def _refused_checkpoint(path, pattern):
    with pytest.raises(jobs.CheckpointError) as info:
        jobs.load_checkpoint(path, IDENTITY)
    message = str(info.value)
    assert str(path) in message and "\n" not in message, message
    assert re.search(pattern, message), message


# --------------------------------------------------------------------------- checksums
def test_model_file_carries_a_checksum_with_package_version_and_format(saved_model):
    with zipfile.ZipFile(saved_model) as archive:
        names = [n for n in archive.namelist() if n.endswith("/geogpvae-checksum.json")]
        assert len(names) == 1, archive.namelist()
        record = json.loads(archive.read(names[0]))
    assert record["format"] == "geogpvae-checksum"
    assert record["package_version"] == geogpvae.__version__
    assert re.fullmatch(r"[0-9a-f]{64}", record["sha256"])
    assert torch.load(saved_model, weights_only=True)["format"] == "geogpvae-imputer"  # still plain torch


def test_model_file_with_flipped_bytes_is_refused(saved_model, tmp_path):
    path = tmp_path / "flipped.pt"
    path.write_bytes(saved_model.read_bytes())
    _flip(path, 64)
    _refused_model(path, r"damaged")


def test_model_file_altered_with_right_crcs_fails_its_checksum(saved_model, tmp_path):
    path = tmp_path / "altered.pt"
    path.write_bytes(saved_model.read_bytes())
    _alter(path)
    _refused_model(path, r"does not match its checksum")


def test_model_file_of_the_previous_version_without_checksum_loads(saved_model, field, tmp_path):
    path = tmp_path / "previous.pt"
    torch.save(torch.load(saved_model, weights_only=True), path)  # as written before checksums
    np.testing.assert_array_equal(geogpvae.GPVAEImputer.load(path).impute(field).v0.values,
                                  geogpvae.GPVAEImputer.load(saved_model).impute(field).v0.values)


def test_damaged_file_of_the_previous_version_is_refused_too(saved_model, tmp_path):
    path = tmp_path / "previous.pt"
    torch.save(torch.load(saved_model, weights_only=True), path)
    _flip(path, 16, 0x01)
    _refused_model(path, r"damaged")


def test_checkpoint_with_flipped_bits_is_refused(snapshot, tmp_path):
    path = jobs.save_checkpoint(tmp_path / "job.ckpt", snapshot, IDENTITY)
    assert jobs.load_checkpoint(path, IDENTITY)["train"]["epoch"] == 2
    _flip(path, 16, 0x04)
    _refused_checkpoint(path, r"damaged")


def test_checkpoint_altered_with_right_crcs_fails_its_checksum(snapshot, tmp_path):
    path = jobs.save_checkpoint(tmp_path / "job.ckpt", snapshot, IDENTITY)
    _alter(path)
    _refused_checkpoint(path, r"does not match its checksum")


# --------------------------------------------------------------------------- values in model files
def test_model_file_version_not_a_number_is_named(saved_model, tmp_path):
    path = _model_with(saved_model, tmp_path, lambda s: s.update(version="abc"))
    _refused_model(path, r"version 'abc' is not a whole number")
    path = _model_with(saved_model, tmp_path, lambda s: s["engine"].update(version="abc"))
    _refused_model(path, r"version 'abc' is not a whole number")


def test_model_file_with_nan_weights_is_refused_at_load(saved_model, tmp_path):
    def poison(state):
        weights = state["engine"]["weights"]
        name = next(n for n in weights if n.startswith("encoder") and n.endswith("weight"))
        weights[name][0, 0] = float("nan")

    _refused_model(_model_with(saved_model, tmp_path, poison), r"encoder.*NaN or infinite")


def test_model_file_with_infinite_scaler_is_refused(saved_model, tmp_path):
    path = _model_with(saved_model, tmp_path, lambda s: s["engine"]["scale"].__setitem__(0, float("inf")))
    _refused_model(path, r"'scale'.*NaN or infinite")


def test_model_file_scalers_of_another_number_of_variables_are_refused(saved_model, tmp_path):
    path = _model_with(saved_model, tmp_path, lambda s: s["engine"].update(loc=torch.zeros(5, dtype=torch.float64)))
    _refused_model(path, r"'loc' has shape \(5,\)")


def test_model_file_weights_of_another_shape_are_refused_by_name(saved_model, tmp_path):
    def other(state):
        weights = state["engine"]["weights"]
        name = next(n for n in weights if n.startswith("decoder") and n.endswith("weight"))
        weights[name] = torch.zeros(7, *weights[name].shape[1:])
        state["_name"] = name

    path = _model_with(saved_model, tmp_path, other)
    _refused_model(path, r"weight .*decoder.* has shape \(7, .*3 variables in 2 dimensions")


def test_model_file_coordinates_of_another_dimension_are_refused(saved_model, tmp_path):
    path = _model_with(saved_model, tmp_path, lambda s: s["engine"].update(n_dims=3))
    _refused_model(path, r"shape")


# --------------------------------------------------------------------------- values in checkpoints
@pytest.mark.parametrize("value", [-5, 2.5, "3", True])
def test_checkpoint_epoch_not_a_count_is_refused(snapshot, tmp_path, value):
    path = _checkpoint_with(snapshot, tmp_path, lambda p: p["checkpoint"]["train"].update(epoch=value))
    _refused_checkpoint(path, r"epoch counter .* is not a whole number >= 0")


def test_checkpoint_negative_step_counter_is_refused(snapshot, tmp_path):
    path = _checkpoint_with(snapshot, tmp_path, lambda p: p["checkpoint"]["train"].update(steps=-1))
    _refused_checkpoint(path, r"steps counter -1")


def test_checkpoint_version_not_a_number_is_named(snapshot, tmp_path):
    path = _checkpoint_with(snapshot, tmp_path, lambda p: p.update(version="abc"))
    _refused_checkpoint(path, r"version 'abc' is not a whole number")


def test_checkpoint_with_nan_weights_is_refused(snapshot, tmp_path):
    def poison(payload):
        weights = payload["checkpoint"]["engine"]["weights"]
        weights[next(iter(k for k in weights if k.endswith("weight")))].view(-1)[0] = float("nan")

    _refused_checkpoint(_checkpoint_with(snapshot, tmp_path, poison), r"NaN or infinite")


def test_checkpoint_with_nan_optimiser_state_is_refused(snapshot, tmp_path):
    def poison(payload):
        state = payload["checkpoint"]["train"]["optimizer"]["state"]
        moments = next(v for s in state.values() for k, v in s.items() if k == "exp_avg")
        moments.view(-1)[0] = float("inf")

    _refused_checkpoint(_checkpoint_with(snapshot, tmp_path, poison), r"optimizer.*NaN or infinite")


def test_checkpoint_weights_of_another_shape_are_refused(snapshot, tmp_path):
    def other(payload):
        weights = payload["checkpoint"]["engine"]["weights"]
        name = next(n for n in weights if n.startswith("encoder") and n.endswith("weight"))
        weights[name] = torch.zeros(3, 3)

    _refused_checkpoint(_checkpoint_with(snapshot, tmp_path, other), r"weight .*encoder.* has shape \(3, 3\)")


def test_checking_a_checkpoint_leaves_the_random_generator_as_it_was(snapshot, tmp_path):
    path = jobs.save_checkpoint(tmp_path / "job.ckpt", snapshot, IDENTITY)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    jobs.load_checkpoint(path, IDENTITY)
    assert torch.equal(torch.rand(3), expected)


# --------------------------------------------------------------------------- temporary files
def _temps(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_torch_temp_swapped_for_a_link_before_the_write_is_not_followed(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    create = torch_files._create_temp

    def swap(target):
        tmp = create(target)
        tmp.unlink()
        tmp.symlink_to(victim)
        return tmp

    monkeypatch.setattr(torch_files, "_create_temp", swap)
    with pytest.raises(OSError):
        torch_files.atomic_torch_save({"a": torch.arange(3)}, tmp_path / "m.pt")
    assert victim.read_text() == "precious"
    assert not os.path.lexists(tmp_path / "m.pt") and _temps(tmp_path) == []


def test_torch_temp_swapped_for_another_file_is_refused(tmp_path, monkeypatch):
    create = torch_files._create_temp

    def swap(target):
        tmp = create(target)
        tmp.rename(tmp_path / "aside")  # kept: its inode is not reused
        tmp.write_bytes(b"someone else's")
        return tmp

    monkeypatch.setattr(torch_files, "_create_temp", swap)
    with pytest.raises(OSError, match="replaced"):
        torch_files.atomic_torch_save({"a": 1}, tmp_path / "m.pt")
    assert not os.path.lexists(tmp_path / "m.pt") and _temps(tmp_path) == []


def test_staged_model_swapped_for_a_link_before_commit_is_not_moved(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    staged = torch_files.stage_torch_save({"a": 1}, tmp_path / "m.pt")
    staged.tmp.unlink()
    staged.tmp.symlink_to(victim)
    with pytest.raises(OSError, match="replaced"):
        staged.commit()
    assert not os.path.lexists(tmp_path / "m.pt") and victim.read_text() == "precious"


def test_netcdf_temp_swapped_for_a_link_after_the_write_is_not_moved(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    write = io._write_netcdf

    def swap(ds, tmp, engine):
        write(ds, tmp, engine)
        tmp.unlink()
        tmp.symlink_to(victim)

    monkeypatch.setattr(io, "_write_netcdf", swap)
    with pytest.raises(OSError, match="replaced"):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), tmp_path / "out.nc")
    assert not os.path.lexists(tmp_path / "out.nc") and victim.read_text() == "precious"
    assert _temps(tmp_path) == []


def test_netcdf_temp_swapped_for_another_file_is_not_moved(tmp_path, monkeypatch):
    write = io._write_netcdf

    def swap(ds, tmp, engine):
        write(ds, tmp, engine)
        tmp.rename(tmp_path / "aside")  # kept: its inode is not reused
        tmp.write_bytes((tmp_path / "aside").read_bytes())  # the same bytes, another file

    monkeypatch.setattr(io, "_write_netcdf", swap)
    with pytest.raises(OSError, match="replaced"):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), tmp_path / "out.nc")
    assert not os.path.lexists(tmp_path / "out.nc")


@pytest.mark.parametrize("special", [stat.S_ISUID, stat.S_ISGID, stat.S_ISVTX])
def test_replaced_output_keeps_its_permissions_but_not_setuid_setgid_or_sticky(tmp_path, special):
    target = tmp_path / "out.nc"
    io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), target)
    os.chmod(target, 0o750 | special)
    if not target.stat().st_mode & special:
        pytest.skip("this file system or user cannot set that bit")
    io.to_netcdf(xr.Dataset({"v": ("x", np.arange(4.0))}), target, overwrite=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def test_a_damaged_checkpoint_given_to_fit_is_refused_before_any_training():
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 2)), rng.normal(size=(40, 2))
    good = GPVAEEngine(neighbours=4, epochs=2, progress=False).fit(x, y).checkpoint()
    bad = {**good, "train": {**good["train"], "epoch": -5}}
    steps = []
    engine = GPVAEEngine(neighbours=4, epochs=2, progress=False)
    with pytest.raises(ValueError, match=r"resume is not an intact geogpvae checkpoint .*epoch counter"):
        engine.fit(x, y, resume=bad, callback=lambda e: steps.append(1))
    assert steps == []
    with pytest.raises(ValueError, match=r"missing entry 'engine'"):
        GPVAEEngine(neighbours=4, epochs=2, progress=False).fit(x, y, resume={"train": good["train"]})
    # through the public API as well, and an intact checkpoint still resumes
    field = make_gaussian_field((8, 8), seed=0)
    imputer = geogpvae.GPVAEImputer(**{**KW, "epochs": 2})
    saved = {}
    imputer.fit(field, callback=lambda e: saved.setdefault("ckpt", e.checkpoint()))
    broken = {**saved["ckpt"], "train": {**saved["ckpt"]["train"], "steps": -1}}
    with pytest.raises(ValueError, match=r"steps counter -1"):
        geogpvae.GPVAEImputer(**{**KW, "epochs": 2}).fit(field, resume=broken)
    geogpvae.GPVAEImputer(**{**KW, "epochs": 2}).fit(field, resume=saved["ckpt"])
