"""Checkpoints and signals of ``geogpvae impute`` (geogpvae/cli/jobs.py): a checkpoint belongs to its
job; SIGTERM stops after the epoch and ``--resume`` carries on as if never stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from cli_helpers import SMALL, _env, _error_line

from geogpvae.cli import impute as cli_impute
from geogpvae.cli import jobs, main
from geogpvae.engine.selection import KL_FACTORS


def _interrupt_at(monkeypatch, epoch: int) -> None:
    """Send this process SIGTERM after ``epoch`` (as a scheduler would)."""
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):
        original(self, engine)
        if engine.train_state.epoch == epoch:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)


def test_checkpoint_belongs_to_its_job(data, tmp_path, capsys, monkeypatch):
    out, ck = tmp_path / "out.nc", tmp_path / "ck"
    args = [
        "impute",
        str(data["grid"]),
        str(out),
        "--neighbours",
        "4",
        "--epochs",
        "5",
        *SMALL,
        "--checkpoint-dir",
        str(ck),
        "--checkpoint-every",
        "100",
        "-q",
    ]
    _interrupt_at(monkeypatch, 4)  # beta="auto" chooses during epochs 1-3, epoch 4 is the first saved
    assert main(args) == 128 + signal.SIGTERM
    assert "stopped by SIGTERM after epoch 4 of 5" in _error_line(capsys)
    assert not out.exists()
    (ckpt,) = ck.glob("*.ckpt")
    payload = torch.load(ckpt, weights_only=True)
    assert payload["format"] == jobs.CHECKPOINT_FORMAT
    assert payload["checkpoint"]["train"]["epoch"] == 4
    assert payload["checkpoint"]["engine"]["kl_factor"] in (1.0, 0.5, 0.2)
    assert payload["job"]["vars"] == ["v0", "v1", "v2"]
    monkeypatch.undo()

    assert main(args) == 2  # neither --resume nor --overwrite
    assert "pass --resume" in _error_line(capsys)
    assert main([*args, "--seed", "7", "--resume"]) == 2
    line = _error_line(capsys)
    assert "different job" in line and "seed 0 -> 7" in line
    assert main([*args, "--resume"]) == 0
    assert out.exists() and not ckpt.exists()


def _wait_for(
    pattern: str, folder: Path, proc: subprocess.Popen, timeout: float = 600
) -> list[Path]:
    # the timeout only guards against a hang: a loaded machine may be slow to get there
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(folder.glob(pattern))
        if found:
            return found
        time.sleep(0.05)
    return list(folder.glob(pattern))


def test_sigterm_then_resume_equals_uninterrupted_run(data, tmp_path):
    out, ck, ref = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "ref.nc"
    job = ["--neighbours", "4", "--epochs", "80", *SMALL, "--seed", "3", "-q"]
    args = [
        "impute",
        str(data["grid"]),
        str(out),
        *job,
        "--checkpoint-dir",
        str(ck),
        "--checkpoint-every",
        "1",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "geogpvae", *args],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = _wait_for("*.ckpt", ck, proc)
        assert found and proc.poll() is None, "the job ended before it could be interrupted"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=600)  # a hang guard
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert rc == 143, err
    assert "stopped by SIGTERM" in err and "--resume" in err
    assert not out.exists()
    saved = torch.load(found[0], weights_only=True)["checkpoint"]["train"]["epoch"]
    assert 1 <= saved < 80

    assert main([*args, "--resume"]) == 0
    assert not found[0].exists()
    assert main(["impute", str(data["grid"]), str(ref), *job]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(ref) as b:
        for name in a.data_vars:
            np.testing.assert_allclose(a[name].values, b[name].values, atol=1e-5, rtol=0)


def test_a_stop_before_the_first_epoch_does_not_promise_a_resume(tmp_path):
    early = str(jobs.JobInterrupted(signal.SIGINT, tmp_path / "a.ckpt", 0, 236))
    assert "before the first training epoch" in early and "starts again from the beginning" in early
    assert "--resume to continue" not in early
    later = str(jobs.JobInterrupted(signal.SIGINT, tmp_path / "a.ckpt", 80, 236))
    assert "after epoch 80 of 236" in later and "run again with --resume to continue" in later


def test_a_signal_in_a_beta_candidate_never_announces_the_end_of_training(data, tmp_path, capsys, monkeypatch):
    # with --epochs 1 each candidate trains the job's whole count of epochs; a signal after the
    # second candidate's says the epoch is finishing, not that training is over
    second = KL_FACTORS[1]
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):
        original(self, engine)
        if getattr(engine.selection_, "factor", None) == second:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)
    args = ["impute", str(data["grid"]), str(tmp_path / "out.nc"), "--neighbours", "4", "--epochs", "1", *SMALL,
            "--checkpoint-dir", str(tmp_path / "ck"), "--progress", "none"]
    assert main(args) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "received SIGTERM: finishing the current epoch, then stopping" in err, err
    assert "training is finished" not in err


def test_a_signal_before_the_first_epoch_stops_after_it_with_a_checkpoint(data, tmp_path, capsys, monkeypatch):
    # a stop is asked for only after an epoch, so even a signal that comes while the data are
    # read leaves one epoch's checkpoint, and --resume carries on from it
    out, ck, whole = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "whole.nc"
    real = cli_impute._train

    def signalled_early(imputer, field, resume, after_epoch, should_stop):
        os.kill(os.getpid(), signal.SIGTERM)  # before any epoch has trained
        return real(imputer, field, resume, after_epoch, should_stop)

    monkeypatch.setattr(cli_impute, "_train", signalled_early)
    args = ["impute", str(data["grid"]), str(out), "--neighbours", "4", "--epochs", "6", *SMALL,
            "--checkpoint-dir", str(ck), "--option", "beta=1"]
    assert main([*args, "-q"]) == 128 + signal.SIGTERM
    line = _error_line(capsys)
    assert "after epoch 1 of 6" in line and "run again with --resume to continue" in line, line
    (ckpt,) = ck.glob("*.ckpt")
    assert torch.load(ckpt, weights_only=True)["checkpoint"]["train"]["epoch"] == 1
    monkeypatch.undo()
    assert main([*args, "--resume", "-q"]) == 0
    assert main(["impute", str(data["grid"]), str(whole), "--neighbours", "4", "--epochs", "6", *SMALL,
                 "--option", "beta=1", "-q"]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:  # as if never stopped
        np.testing.assert_allclose(a["v0"].values, b["v0"].values, rtol=1e-5, atol=1e-6)
    assert not ckpt.exists()


def test_a_stop_during_the_selection_resumes_it_where_it_stood(data, tmp_path, capsys, monkeypatch):
    out, ck, whole = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "whole.nc"
    second = KL_FACTORS[1]
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):  # a signal in the second candidate's last epoch
        original(self, engine)
        if getattr(engine.selection_, "factor", None) == second and engine.train_state.epoch == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)
    # every 3 epochs: each candidate's epoch 3 is saved, the second's over the first's
    args = ["impute", str(data["grid"]), str(out), "--neighbours", "4", "--epochs", "12", *SMALL,
            "--checkpoint-dir", str(ck), "--checkpoint-every", "3"]
    assert main([*args, "-q"]) == 128 + signal.SIGTERM
    line = _error_line(capsys)
    assert f"during the KL-weight selection (beta x{second:g}, epoch 3 of 3)" in line
    assert "run again with --resume to continue" in line
    (ckpt,) = ck.glob("*.ckpt")
    saved = torch.load(ckpt, weights_only=True)["checkpoint"]
    assert set(saved["selection"]["scores"]) == {KL_FACTORS[0]} and saved["selection"]["factor"] == second
    monkeypatch.undo()
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    said = capsys.readouterr()
    assert f"in the KL-weight selection (beta x{second:g} after epoch 3; 1 candidate scored)" in said.out + said.err
    assert main(["impute", str(data["grid"]), str(whole), "--neighbours", "4", "--epochs", "12", *SMALL, "-q"]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:  # as if never stopped
        for name in ("v0", "v0_std"):
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-5, atol=1e-6)
        assert a.attrs["geogpvae_kl_factor"] == b.attrs["geogpvae_kl_factor"]
    assert not ckpt.exists()
