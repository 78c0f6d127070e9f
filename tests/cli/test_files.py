"""Input and output files of ``geogpvae impute`` (geogpvae/cli/files.py): overwrite and
skip-existing, an atomic write, SLURM array tasks and output templates."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from cli_helpers import TINY, _env, _error_line, _no_training, _write

from geogpvae.api import GPVAEImputer
from geogpvae.cli import common as cli_common
from geogpvae.cli import files as cli_files
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field


def test_overwrite_only_when_asked(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    out.write_bytes(b"old")
    args = ["impute", str(data["grid"]), str(out), *TINY]
    assert main(args) == 2
    assert out.read_bytes() == b"old"
    # a file that is not a finished output is neither skipped nor replaced
    assert main([*args, "--skip-existing"]) == 2
    assert "not a finished output" in _error_line(capsys)
    assert out.read_bytes() == b"old"
    assert main([*args, "--overwrite"]) == 0
    assert out.read_bytes()[:4] == b"\x89HDF"
    written = out.read_bytes()
    assert main([*args, "--skip-existing"]) == 0
    assert out.read_bytes() == written


@pytest.mark.parametrize("content", ["empty", "truncated", "foreign"])
def test_skip_existing_refuses_an_unfinished_output(data, tmp_path, capsys, monkeypatch, content):
    """A resubmitted array must not take a broken or foreign OUT for a finished one."""
    out = tmp_path / "out.nc"
    if content == "foreign":
        xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(out)
    else:
        xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(out, engine="netcdf4")
        whole = out.read_bytes()
        out.write_bytes(b"" if content == "empty" else whole[: len(whole) // 2])
    before = out.read_bytes()
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    assert main(["impute", str(data["grid"]), str(out), *TINY, "--skip-existing"]) == 2
    line = _error_line(capsys)
    assert "not a finished output" in line and "--overwrite" in line
    assert ("geogpvae_version" in line) == (content == "foreign")
    assert out.read_bytes() == before


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import geogpvae.fields.io as io
    from geogpvae.cli import main

    original = io._write_netcdf

    def stalling(ds, tmp, engine):
        original(ds, tmp, engine)   # the temporary file is complete but not renamed yet
        print("STALLING", flush=True)
        time.sleep(120)

    io._write_netcdf = stalling
    sys.exit(main(sys.argv[1:]))
    """
)


def test_sigkill_during_the_write_leaves_no_output(data, tmp_path):
    out = tmp_path / "out.nc"
    script = tmp_path / "run.py"
    script.write_text(_KILL_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), "impute", str(data["grid"]), str(out), *TINY],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line, deadline = "", time.monotonic() + 600  # a hang guard, not a speed limit
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if line.strip() == "STALLING" or not line:
                    break
        assert line.strip() == "STALLING", proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert not out.exists()
    assert len(list(tmp_path.glob(".out.nc.*.tmp"))) == 1  # only the hidden temporary file


def test_job_array_task_processes_its_file(data, tmp_path, monkeypatch):
    tiles, outs = tmp_path / "tiles", tmp_path / "filled"
    tiles.mkdir()
    outs.mkdir()
    for i, name in enumerate(["c", "a", "b"]):
        _write(make_gaussian_field((10, 10), seed=10 + i), tiles / f"{name}.nc")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    args = ["impute", str(tiles / "*.nc"), str(outs / "{stem}_{index}.nc"), *TINY]
    assert main(args) == 0
    assert sorted(p.name for p in outs.iterdir()) == ["b_1.nc"]  # sorted: a, b, c
    assert main([*args, "--task-index", "3"]) == 2


def test_job_array_with_outputs_beside_its_inputs_imputes_each_input_once(tmp_path, monkeypatch):
    # outputs of earlier tasks match the input pattern: they are left out of the sorted list,
    # so the list does not shift and every input is imputed, once
    for i in range(3):
        _write(make_gaussian_field((8, 8), seed=20 + i), tmp_path / f"t{i}.nc")
    for task in range(3):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(task))
        assert main(["impute", str(tmp_path / "t*.nc"), str(tmp_path / "{stem}_f.nc"), *TINY]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.nc")) == ["t0.nc", "t0_f.nc", "t1.nc", "t1_f.nc", "t2.nc", "t2_f.nc"]
    files = sorted(str(p) for p in tmp_path.glob("*.nc"))
    with pytest.warns(UserWarning, match=r"leaving out input .*t1_f.nc: it is the output of another input"):
        kept = cli_files.drop_own_outputs(files, str(tmp_path / "{stem}_f.nc"))
    assert [Path(f).name for f in kept] == ["t0.nc", "t1.nc", "t2.nc"]
    # an output written to the same name as its input is not "another input's output"
    assert cli_files.drop_own_outputs(kept, str(tmp_path / "{name}")) == kept


def test_task_selection_and_output_names():
    files = ["a.nc", "b.nc", "c.nc"]
    assert cli_files.select_task(files, None, None, {}) == (files, None)
    assert cli_files.select_task(files, 2, None, {}) == (["c.nc"], 2)
    assert cli_files.select_task(files, None, None, {"SLURM_ARRAY_TASK_ID": "0"}) == (["a.nc"], 0)
    # one file, or files combined along a dim: the array id does not pick
    assert cli_files.select_task(["a.nc"], None, None, {"SLURM_ARRAY_TASK_ID": "4"}) == (["a.nc"], None)
    assert cli_files.select_task(files, None, "time", {"SLURM_ARRAY_TASK_ID": "1"}) == (files, None)
    with pytest.raises(cli_common.UsageError, match="concat-dim"):
        cli_files.select_task(files, 1, "time", {})
    with pytest.raises(cli_common.UsageError, match="outside 0..2"):
        cli_files.select_task(files, 3, None, {})
    assert cli_files.format_output("out/{stem}_f.nc", ["in/x.nc"], 4) == "out/x_f.nc"
    assert cli_files.format_output("o_{index:03d}.nc", ["x.nc"], 4) == "o_004.nc"
    assert cli_files.format_output("plain.nc", files, None) == "plain.nc"
    with pytest.raises(cli_common.UsageError, match="placeholder"):
        cli_files.format_output("{date}.nc", ["x.nc"], 0)
    with pytest.raises(cli_common.UsageError, match="no task index"):
        cli_files.format_output("{index}.nc", ["x.nc"], None)
