"""A fixed job alone and beside busy processes: how much slower it gets with each thread setting.

The job: ``geogpvae impute IN OUT --vars porosity,kx --log-vars kx --epochs 15 --seed 0`` on a
6,600-cell piece of SPE10 (layers 1-2 of the every-second-cell subset, 2 x 110 x 30 cells, a
third of the values hidden), run as its own process. Beside it the script starts K processes
that spin on the CPU (``K = 0, 2, 4, 8`` by default) and stops them, by their pids, when the
job ends. Each setting runs the job once per K:

* ``default``: the package's own thread choice (no ``--threads``, no ``OMP_NUM_THREADS``);
* ``1 thread``: ``--option threads=1``;
* ``--settings`` adds others, e.g. ``"2 threads=--option threads=2"``.

Printed per setting and K: the job's wall seconds, the thread choice it wrote to its output,
and its slowdown against the same setting alone. Goal (issue 53): the default's slowdown at most
1.3 times that of one thread at every K, and the default alone no slower than before. Where the
default takes one thread under load, that ratio is one thread's seconds alone over the
default's, so the seconds beside one thread's are printed too. The VM's speed drifts by
20-40 %: compare settings within one run.

    python benchmarks/contention.py                     # K = 0, 2, 4, 8
    python benchmarks/contention.py --busy 0,8 --settings "2 threads=--option threads=2"

Needs the SPE10 files (GEOGPVAE_DATA_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SPIN = "while True: pass"


def make_input(folder: Path) -> Path:
    from geogpvae.datasets import load_spe10
    from geogpvae.fields.io import to_netcdf

    ds = load_spe10(downsample=2, variables=["porosity", "kx"]).isel(z=slice(0, 2))
    rng = np.random.default_rng(0)
    for name in ("porosity", "kx"):
        ds[name] = ds[name].where(rng.random(ds[name].shape) >= 1 / 3)
    return to_netcdf(ds, folder / "spe10_piece.nc", overwrite=True)


def threads_used(out: Path) -> str:
    """The thread choice the job wrote to its output (``geogpvae_threads``)."""
    import netCDF4

    with netCDF4.Dataset(out) as nc:
        return str(getattr(nc, "geogpvae_threads", "?"))


def run_job(path: Path, out: Path, extra: list[str], env: dict[str, str]) -> float:
    cmd = [sys.executable, "-m", "geogpvae", "impute", str(path), str(out), "--vars", "porosity,kx",
           "--log-vars", "kx", "--epochs", "15", "--seed", "0", "--overwrite", "-q", *extra]
    start = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"the job failed ({res.returncode}): {res.stderr[-1500:]}")
    return seconds


def with_busy(k: int, job) -> float:
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(k)]
    try:
        time.sleep(1.0 if k else 0.0)  # let them get going
        return job()
    finally:
        for p in spinners:
            os.kill(p.pid, signal.SIGKILL)
        for p in spinners:
            p.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--busy", default="0,2,4,8", help="numbers of busy processes, comma-separated")
    p.add_argument("--settings", action="append", default=[],
                   help='another setting as "NAME=ARGS", e.g. "2 threads=--option threads=2"')
    p.add_argument("--json", default=None)
    args = p.parse_args()
    busy = [int(k) for k in args.busy.split(",") if k]
    settings = {"default": [], "1 thread": ["--option", "threads=1"]}
    for item in args.settings:
        name, _, extra = item.partition("=")
        settings[name] = extra.split()
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; job: SPE10 piece "
          "2 x 110 x 30, porosity and kx, 15 epochs")
    results: dict[str, dict[int, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = make_input(folder)
        for k in busy:
            for name, extra in settings.items():
                seconds = with_busy(k, lambda: run_job(path, folder / "out.nc", extra, env))
                results.setdefault(name, {})[k] = seconds
                print(f"  {name:12s} K={k}: {seconds:7.1f} s  {threads_used(folder / 'out.nc')}", flush=True)
    print(f"\n{'setting':12s} " + " ".join(f"{'K=' + str(k):>16s}" for k in busy))
    for name, row in results.items():
        base = row.get(0)
        cells = [f"{row[k]:7.1f} s" + (f" ({row[k] / base:4.1f}x)" if base else "") for k in busy]
        print(f"{name:12s} " + " ".join(f"{c:>16s}" for c in cells))
    if 0 in busy and "1 thread" in results:
        one = results["1 thread"]
        for k in busy:
            if k:
                ratio = (results["default"][k] / results["default"][0]) / (one[k] / one[0])
                print(f"  K={k}: default's slowdown / one thread's = {ratio:.2f} (goal <= 1.3); "
                      f"default's seconds / one thread's = {results['default'][k] / one[k]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"busy": busy, "results": results}, indent=1))


if __name__ == "__main__":
    main()
