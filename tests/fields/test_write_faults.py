"""Faults around writing outputs: racing writers, leftovers of killed runs, aborted writes.

The race is real: two processes write the same new file and are held at a barrier after
their temporary files are complete, so both have passed every "does it exist?" check before
either moves its file into place.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from geogpvae.fields import atomic, io, torch_files

REPO = Path(__file__).resolve().parents[2]

_RACER = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np, xarray as xr
    import geogpvae.fields.io as io

    out, me, barrier, value = sys.argv[1:]
    write = io._write_netcdf

    def held(ds, tmp, engine):
        write(ds, tmp, engine)
        open(os.path.join(barrier, me), "w").close()
        deadline = time.time() + 120
        while len(os.listdir(barrier)) < 2 and time.time() < deadline:
            time.sleep(0.01)

    io._write_netcdf = held
    ds = xr.Dataset({"v": ("x", np.full(50, float(value)))})
    try:
        io.to_netcdf(ds, out)
    except FileExistsError as err:
        print(err)
        sys.exit(2)
    print("wrote", out)
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore:epochs="  # short budgets on purpose (pyproject.toml's filter)
    return env


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_two_processes_writing_one_new_file_one_wins(tmp_path):
    out, barrier = tmp_path / "out.nc", tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen([sys.executable, "-c", _RACER, str(out), name, str(barrier), value],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        for name, value in (("a", "1"), ("b", "2"))
    ]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    codes = sorted(r[0] for r in results)
    assert codes == [0, 2], results
    winner = "1" if results[0][0] == 0 else "2"
    loser = results[1] if results[0][0] == 0 else results[0]
    assert "already exists" in loser[1] and "overwrite=True" in loser[1]
    with xr.open_dataset(out) as back:
        assert np.array_equal(back.v.values, np.full(50, float(winner)))
    assert _temps(tmp_path) == []


def test_file_appearing_during_the_write_is_not_replaced(tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    write = io._write_netcdf

    def other_writer_finishes_first(ds, tmp, engine):
        write(ds, tmp, engine)
        out.write_bytes(b"the other job's result")

    monkeypatch.setattr(io, "_write_netcdf", other_writer_finishes_first)
    with pytest.raises(FileExistsError, match=r"another process created it"):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    assert out.read_bytes() == b"the other job's result"
    assert _temps(tmp_path) == []


def test_overwrite_still_replaces_atomically(tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    io.to_netcdf(xr.Dataset({"v": ("x", np.arange(4.0))}), out, overwrite=True)
    with xr.open_dataset(out) as back:
        assert back.sizes["x"] == 4
    assert _temps(tmp_path) == []


def test_torch_save_appearing_target_not_replaced(tmp_path, monkeypatch):
    out = tmp_path / "m.pt"
    create = torch_files._create_temp

    def racing(target):
        tmp = create(target)
        target.write_bytes(b"first")
        return tmp

    monkeypatch.setattr(torch_files, "_create_temp", racing)
    with pytest.raises(FileExistsError, match="another process"):
        torch_files.atomic_torch_save({"a": 1}, out)
    assert out.read_bytes() == b"first"
    assert _temps(tmp_path) == []


def test_without_hard_links_the_name_is_reserved_exclusively(tmp_path, monkeypatch):
    import errno

    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(io.os, "link", no_links)
    out = tmp_path / "out.nc"
    io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    with xr.open_dataset(out) as back:
        assert back.sizes["x"] == 3
    with pytest.raises(FileExistsError):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    assert _temps(tmp_path) == []


# --------------------------------------------------------------------------- leftovers
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_killed_runs_are_removed_and_others_named(tmp_path):
    out = tmp_path / "out.nc"
    host = atomic._host()
    dead = tmp_path / f".out.nc.{_dead_pid()}@{host}.0123456789ab.tmp"
    alive = tmp_path / f".out.nc.{os.getpid()}@{host}.0123456789ac.tmp"
    remote = tmp_path / ".out.nc.12345@elsewhere.0123456789ad.tmp"
    older = tmp_path / ".out.nc.0123456789ae.tmp"
    unrelated = tmp_path / f".other.nc.{_dead_pid()}@{host}.0123456789af.tmp"
    for p in (dead, alive, remote, older, unrelated):
        p.write_bytes(b"partial")
    with pytest.warns(UserWarning) as record:
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    text = "\n".join(str(w.message) for w in record)
    assert not dead.exists() and f"removed {dead}" in text
    for kept in (alive, remote, older):
        assert kept.exists() and str(kept) in text
    assert "host elsewhere" in text and "earlier geogpvae version" in text
    assert unrelated.exists() and str(unrelated) not in text


def test_sigkilled_write_leftover_removed_by_next_run(tmp_path):
    """A writer killed with SIGKILL mid-write leaves its temporary file; the next run removes it."""
    out = tmp_path / "out.nc"
    code = textwrap.dedent(
        f"""
        import os, signal, numpy as np, xarray as xr
        import geogpvae.fields.io as io
        write = io._write_netcdf
        def killed(ds, tmp, engine):
            write(ds, tmp, engine)
            os.kill(os.getpid(), signal.SIGKILL)
        io._write_netcdf = killed
        io.to_netcdf(xr.Dataset({{"v": ("x", np.arange(9.0))}}), {str(out)!r})
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), timeout=300, check=False)
    assert proc.returncode == -9
    assert not out.exists()
    left = _temps(tmp_path)
    assert len(left) == 1
    with pytest.warns(UserWarning, match="left by a killed write"):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    assert _temps(tmp_path) == []


# --------------------------------------------------------------------------- aborting
def test_abort_partial_writes_removes_the_temporary_file(tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    write = io._write_netcdf
    removed = []

    def aborted(ds, tmp, engine):
        write(ds, tmp, engine)
        removed.extend(atomic.abort_partial_writes())  # what a signal handler does

    monkeypatch.setattr(io, "_write_netcdf", aborted)
    with pytest.raises(InterruptedError, match="aborted"):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    assert len(removed) == 1 and not removed[0].exists()
    assert not out.exists() and _temps(tmp_path) == []


def test_staging_folder_is_private_and_goes_away(tmp_path, monkeypatch):
    """netCDF reopens the temporary file by name: it lies in a folder only its owner may enter."""
    out = tmp_path / "out.nc"
    seen = {}
    write = io._write_netcdf

    def spying(ds, tmp, engine):
        seen["folder"], seen["mode"] = Path(tmp).parent, stat.S_IMODE(os.stat(Path(tmp).parent).st_mode)
        write(ds, tmp, engine)

    monkeypatch.setattr(io, "_write_netcdf", spying)
    io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    assert seen["folder"].parent == tmp_path and seen["folder"].name.startswith(".out.nc.")
    assert seen["mode"] == 0o700
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]


def test_staging_folder_of_a_killed_run_is_removed(tmp_path):
    out = tmp_path / "out.nc"
    dead = tmp_path / f".out.nc.{_dead_pid()}@{atomic._host()}.0123456789ab.tmp"
    dead.mkdir(mode=0o700)
    (dead / "out.nc").write_bytes(b"partial")
    with pytest.warns(UserWarning, match="removed"):
        io.to_netcdf(xr.Dataset({"v": ("x", np.arange(3.0))}), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]
