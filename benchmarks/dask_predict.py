"""Prediction on a large grid in blocks, on a dask ``distributed.LocalCluster``: time and memory per worker.

A model is fitted on a synthetic survey (400 scattered sites, two variables, package defaults),
then ``GPVAEImputer.predict(grid, chunks=...)`` is written to NetCDF block by block by the
workers of a LocalCluster. Prints, per grid size, the wall seconds of the prediction and write,
the peak resident memory of each worker process, and of this process; the per-worker peak should
not grow with the grid.

    python benchmarks/dask_predict.py --cells 1e6,1e7 --workers 2 --block 250000
"""

from __future__ import annotations

import argparse
import math
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

import geogpvae
from geogpvae.datasets import make_gaussian_field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from _requires import require


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default="1e6,1e7", help="grid sizes, comma separated")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--block", type=float, default=250000, help="cells per block")
    args = p.parse_args()
    require("benchmarks/dask_predict.py", {"distributed": "distributed"}, extra="dask")
    from distributed import Client, LocalCluster

    print(f"{platform.machine()}, {args.workers} workers x 1 thread; {reference_line()}", flush=True)
    survey = make_gaussian_field(n_points=400, n_vars=2, seed=0)
    t = time.perf_counter()
    imputer = geogpvae.GPVAEImputer(seed=0, progress=False, threads=1).fit(survey)
    print(f"fit: {time.perf_counter() - t:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None, local_directory=tmp
    ) as cluster, Client(cluster) as client:
        for cells in (int(float(c)) for c in args.cells.split(",")):
            client.restart()  # every size starts from fresh workers: their peaks are this size's
            ny = int(math.sqrt(cells))
            nx = cells // ny
            side = int(math.sqrt(args.block))
            grid = xr.Dataset(coords={"y": np.linspace(0, 1, ny), "x": np.linspace(0, 1, nx)})
            for c in ("x", "y"):
                grid[c].attrs = dict(survey[c].attrs)
            path = Path(tmp) / f"grid_{cells}.nc"
            t = time.perf_counter()
            out = imputer.predict(grid, chunks={"y": side, "x": side})
            geogpvae.to_netcdf(out, path)
            secs = time.perf_counter() - t
            peaks = client.run(_peak_mib)
            with xr.open_dataset(path) as back:
                finite = bool(np.isfinite(back.v0.values).all())
            print(f"{ny * nx:>11,} cells, blocks of {side} x {side}: {secs:.1f} s ({secs / (ny * nx) * 1e6:.1f} us a cell), "
                  f"worker peaks {', '.join(f'{v:.0f}' for v in peaks.values())} MiB, this process {_peak_mib():.0f} MiB, "
                  f"all finite: {finite}", flush=True)


if __name__ == "__main__":
    main()
