"""Faults a cluster job meets, through the real entry point (``python -m geogpvae``).

* two jobs racing for one ``OUT``: exactly one writes it, the other exits 2 naming
  ``--overwrite`` and leaves neither ``OUT`` nor its ``--save-model`` file;
* a damaged, truncated or foreign model file (``predict``) or checkpoint (``--resume``):
  one line naming the file and the problem, exit 2, no traceback, never advising
  ``weights_only=False``;
* a second SIGTERM/SIGINT while the output is being written (or after the first signal,
  while training finishes its epoch): the job stops at once, exit 128 + N, no ``OUT`` and
  no temporary file left.

Each job is started with a small wrapper script that stalls the NetCDF write at a known
point (a monkeypatch inside the child process, invisible to users), so that signals and
races hit the write deterministically instead of by timing.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

import geogpvae
from geogpvae.cli import jobs, main
from geogpvae.datasets import make_gaussian_field

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "--neighbours", "4",
    "--option", "encoder_hidden=[16,16]",
    "--option", "decoder_hidden=[16,16]",
    "--option", "samples=8",
    "--option", "calibrate=false",
]  # fmt: skip
TINY = [*SMALL, "--epochs", "3", "-q"]
HANG_GUARD = 600  # seconds; only against a hang, never a speed limit


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    # the short training budgets of these tests are on purpose: their TrainingWarning is
    # ignored, as pyproject.toml's filter does in this process
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore:epochs="}


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """A small grid and a model trained on it."""
    root = tmp_path_factory.mktemp("faults")
    grid = geogpvae.to_netcdf(make_gaussian_field((16, 16), seed=0), root / "grid.nc")
    model = root / "grid.pt"
    assert main(["impute", str(grid), str(root / "out.nc"), *TINY, "--save-model", str(model)]) == 0
    return {"root": root, "grid": grid, "model": model}


# =========================================================================== the write race
# Each racer holds at a barrier once its temporary OUT is complete, so both have passed
# every "does OUT exist?" check (and staged their model files) before either creates OUT.
_RACER = textwrap.dedent(
    """
    import os, sys, time
    import geogpvae.fields.io as io
    from geogpvae.cli import main

    barrier, me = sys.argv[1:3]
    write = io._write_netcdf

    def held(ds, tmp, engine):
        write(ds, tmp, engine)
        open(os.path.join(barrier, me), "w").close()
        deadline = time.time() + 600
        while len(os.listdir(barrier)) < 2 and time.time() < deadline:
            time.sleep(0.01)

    io._write_netcdf = held
    sys.exit(main(sys.argv[3:]))
    """
)


def test_racing_jobs_one_writes_the_other_exits_2_and_leaves_nothing(data, tmp_path):
    out, barrier, script = tmp_path / "out.nc", tmp_path / "barrier", tmp_path / "racer.py"
    barrier.mkdir()
    script.write_text(_RACER)
    procs = {
        seed: subprocess.Popen(
            [sys.executable, str(script), str(barrier), seed, "impute", str(data["grid"]),
             str(out), *TINY, "--seed", seed, "--save-model", str(tmp_path / f"m{seed}.pt")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        )
        for seed in ("1", "2")
    }  # fmt: skip
    results = {s: (p.wait(timeout=HANG_GUARD), p.stderr.read()) for s, p in procs.items()}
    for p in procs.values():
        p.stdout.close(), p.stderr.close()
    codes = sorted(code for code, _ in results.values())
    assert codes == [0, 2], results
    winner = next(s for s, (code, _) in results.items() if code == 0)
    loser = next(s for s, (code, _) in results.items() if code == 2)
    lines = results[loser][1].strip().splitlines()
    # when the winner's temporary file already exists as the loser starts its write, the loser
    # names it in a warning (a write in progress); that depends on timing, so it may be absent
    errors = [line for line in lines if line.startswith("geogpvae: error: ")]
    others = [line for line in lines if not line.startswith("geogpvae: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], results[loser][1]
    assert all("is a temporary file of process" in line and f".{out.name}." in line for line in others), others
    assert str(out) in errors[0] and "--overwrite" in errors[0], errors[0]
    assert "overwrite=True" not in errors[0]
    with xr.open_dataset(out) as back:
        assert back.attrs["geogpvae_command"].split("--seed ")[1].startswith(winner)
    # the winner's model is saved; the loser's is not left behind
    assert (tmp_path / f"m{winner}.pt").exists()
    assert not (tmp_path / f"m{loser}.pt").exists()
    assert _temps(tmp_path) == []


def test_model_file_taken_during_the_run_leaves_no_output(data, tmp_path, capsys, monkeypatch):
    """The model file appears while OUT is written: the job fails and takes OUT back."""
    from geogpvae.fields import io

    out, model = tmp_path / "out.nc", tmp_path / "m.pt"
    write = io._write_netcdf

    def another_job_saves_its_model(ds, tmp, engine):
        write(ds, tmp, engine)
        model.write_bytes(b"another job's model")

    monkeypatch.setattr(io, "_write_netcdf", another_job_saves_its_model)
    args = ["impute", str(data["grid"]), str(out), *TINY, "--save-model", str(model)]
    assert main(args) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert str(model) in line and "--overwrite" in line, line
    assert model.read_bytes() == b"another job's model"
    assert not out.exists() and _temps(tmp_path) == []


def test_predict_losing_the_race_for_its_output_names_overwrite(data, tmp_path, capsys,
                                                                monkeypatch):
    from geogpvae.fields import io

    coords = geogpvae.to_netcdf(
        xr.Dataset(coords={"y": np.linspace(0, 1, 3), "x": np.linspace(0, 1, 4)}),
        tmp_path / "coords.nc",
    )
    out, write = tmp_path / "pred.nc", io._write_netcdf

    def another_job_finishes_first(ds, tmp, engine):
        write(ds, tmp, engine)
        out.write_bytes(b"the other job's result")

    monkeypatch.setattr(io, "_write_netcdf", another_job_finishes_first)
    assert main(["predict", str(data["model"]), str(coords), str(out), "-q"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert str(out) in line and "--overwrite" in line and "overwrite=True" not in line
    assert out.read_bytes() == b"the other job's result" and _temps(tmp_path) == []


# =========================================================================== damaged files
def _run(args: list[str]) -> tuple[int, str]:
    res = subprocess.run([sys.executable, "-m", "geogpvae", *args], capture_output=True,
                         text=True, env=_env(), timeout=HANG_GUARD, check=False)
    return res.returncode, res.stderr


def _run_here(args: list[str], capsys) -> tuple[int, str]:
    """``geogpvae ARGS`` in this process (the entry point ``python -m geogpvae`` calls the same
    ``main``; other tests here run it as a process)."""
    from geogpvae.cli import main

    capsys.readouterr()
    code = main(args)
    return code, capsys.readouterr().err


class _Anything:
    """Not a plain value: ``weights_only`` loading refuses it."""


def _bad_file(kind: str, path: Path, good: Path) -> list[str]:
    """Write a bad file of ``kind`` at ``path``; returns words the message must hold."""
    blob = good.read_bytes()
    if kind == "empty":
        path.write_bytes(b"")
        return ["empty"]
    if kind == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
        return ["damaged or truncated"]
    if kind == "damaged":  # the zip directory at the end overwritten
        path.write_bytes(blob[:-200] + bytes(200))
        return ["damaged or truncated"]
    if kind == "netcdf":
        path.write_bytes((good.parent / "grid.nc").read_bytes())
        return ["not a file written by torch.save"]
    if kind == "pickle":
        path.write_bytes(pickle.dumps({"w": 1}))
        return ["not a file written by torch.save"]
    if kind == "objects":
        torch.save({"format": "x", "payload": _Anything()}, path)
        return ["Python objects", "never loaded"]
    if kind == "other_torch":
        torch.save({"weights": torch.zeros(3)}, path)
        return ["not a geogpvae"]
    raise AssertionError(kind)


def _assert_one_clear_line(code: int, err: str, path: Path, words: list[str]) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("geogpvae: error: "), err
    assert str(path) in lines[0], lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "weights_only" not in err and "Traceback" not in err


KINDS = ["empty", "truncated", "damaged", "netcdf", "pickle", "objects", "other_torch"]


@pytest.mark.parametrize("kind", KINDS)
def test_predict_with_a_bad_model_file_says_so_in_one_line(kind, data, tmp_path, capsys):
    coords = geogpvae.to_netcdf(
        xr.Dataset(coords={"y": np.linspace(0, 1, 3), "x": np.linspace(0, 1, 4)}),
        tmp_path / "coords.nc",
    )
    model, out = tmp_path / "bad.pt", tmp_path / "pred.nc"
    words = _bad_file(kind, model, data["model"])
    code, err = _run_here(["predict", str(model), str(coords), str(out)], capsys)
    _assert_one_clear_line(code, err, model, words)
    assert not out.exists() and _temps(tmp_path) == []


@pytest.mark.parametrize("kind", ["empty", "truncated", "damaged", "objects", "other_torch"])
def test_resume_from_a_bad_checkpoint_says_so_in_one_line(kind, data, tmp_path, capsys):
    out, folder = tmp_path / "out.nc", tmp_path / "ck"
    folder.mkdir()
    checkpoint = jobs.checkpoint_path(folder, out)
    words = _bad_file(kind, checkpoint, data["model"])
    if kind == "other_torch":
        words = ["not a geogpvae checkpoint"]
    before = checkpoint.read_bytes()
    args = ["impute", str(data["grid"]), str(out), *TINY, "--checkpoint-dir", str(folder)]
    code, err = _run_here([*args, "--resume"], capsys)
    _assert_one_clear_line(code, err, checkpoint, [*words, "--overwrite"])
    assert checkpoint.read_bytes() == before  # kept for the user to look at
    assert not out.exists()


# =========================================================================== a second signal
# ``write``: the temporary OUT (and the staged model) are complete but not yet in place;
# ``epoch``: training sits at the end of epoch 1, after the first signal asked it to stop.
# In the write, the stall is a call into C that signals do not interrupt (waiting for a
# mutex this thread holds, for an hour), as a long compression or a slow file system would
# be: a job that handled signals only between Python bytecodes of its writing thread
# could not stop there.
_STALLER = textwrap.dedent(
    """
    import ctypes, sys, time
    import geogpvae.fields.io as io
    import geogpvae.cli.impute as impute
    from geogpvae.cli import main

    where = sys.argv[1]
    write, after_epoch = io._write_netcdf, impute._Checkpointer.after_epoch

    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

    def stall():
        print("STALLING", flush=True)
        time.sleep(600)

    def stall_in_c():
        libc = ctypes.CDLL(None, use_errno=True)
        mutex = ctypes.create_string_buffer(64)  # zeros: a default pthread mutex
        libc.pthread_mutex_lock(mutex)
        print("STALLING", flush=True)
        libc.pthread_mutex_timedlock(mutex, ctypes.byref(Timespec(int(time.time()) + 3600, 0)))

    def stalled_write(ds, tmp, engine):
        write(ds, tmp, engine)
        stall_in_c() if sys.platform.startswith("linux") else stall()

    def stalled_epoch(self, engine):
        after_epoch(self, engine)
        stall()  # the first epoch saved (after beta="auto"'s selection)

    if where == "write":
        io._write_netcdf = stalled_write
    else:
        impute._Checkpointer.after_epoch = stalled_epoch
    sys.exit(main(sys.argv[2:]))
    """
)


def _read_until(proc: subprocess.Popen, stream, text: str) -> str:
    """What ``stream`` of ``proc`` printed until ``text`` appeared, the stream ended or the
    hang guard ran out (never blocks on a silent process)."""
    fd, seen = stream.fileno(), b""
    deadline = time.monotonic() + HANG_GUARD
    while text.encode() not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


def _twice(proc: subprocess.Popen, sig: signal.Signals) -> tuple[int, str]:
    """Signal ``proc`` once, wait for it to say so, then signal it again."""
    try:
        assert "STALLING" in _read_until(proc, proc.stdout, "STALLING"), "did not get there"
        proc.send_signal(sig)
        first = _read_until(proc, proc.stderr, "send it again")
        assert "send it again" in first, first
        proc.send_signal(sig)
        code = proc.wait(timeout=HANG_GUARD)
        return code, first + _read_until(proc, proc.stderr, "\0")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close(), proc.stderr.close()


def _start(script: Path, where: str, args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), where, *args], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_second_signal_during_the_write_stops_at_once(sig, data, tmp_path):
    out, model, folder = tmp_path / "out.nc", tmp_path / "m.pt", tmp_path / "ck"
    script = tmp_path / "stall.py"
    script.write_text(_STALLER)
    args = ["impute", str(data["grid"]), str(out), *SMALL, "--epochs", "3", "--save-model",
            str(model), "--checkpoint-dir", str(folder)]  # fmt: skip
    proc = _start(script, "write", args)
    code, err = _twice(proc, sig)
    assert code == 128 + sig, err
    assert f"received {sig.name}: training is finished" in err
    assert f"received {sig.name} again: stopping now; removed " in err and "Traceback" not in err
    assert f"{tmp_path}/.out.nc." in err and f"{tmp_path}/.m.pt." in err  # both were staged
    assert not out.exists() and not model.exists()
    assert _temps(tmp_path) == [] and _temps(folder) == []
    # the checkpoint of the finished training stays: --resume only predicts and writes
    (checkpoint,) = folder.glob("*.ckpt")
    assert main([*args, "-q", "--resume"]) == 0
    assert out.exists() and model.exists() and not checkpoint.exists()


def test_second_signal_while_the_epoch_finishes_stops_at_once(data, tmp_path):
    out, folder, script = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "stall.py"
    script.write_text(_STALLER)
    args = ["impute", str(data["grid"]), str(out), *SMALL, "--epochs", "5",
            "--checkpoint-dir", str(folder), "--checkpoint-every", "100"]  # fmt: skip
    code, err = _twice(_start(script, "epoch", args), signal.SIGTERM)
    assert code == 143, err
    assert "finishing the current epoch" in err and "again: stopping now" in err
    assert not out.exists() and list(folder.iterdir()) == []
