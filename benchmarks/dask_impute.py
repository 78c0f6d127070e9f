"""Imputing a chunked grid: the prediction at the call (in memory) against block by block on a dask cluster.

A synthetic grid (two variables, half the cells missing) is fitted once, then imputed and written to
NetCDF twice: ``impute(ds)`` of the in-memory Dataset (prediction at the call, in this process), and
``impute(ds.chunk(...))``, whose blocks a ``distributed.LocalCluster`` predicts and writes when the
file is written. Prints the seconds of each, the peak resident memory of each worker, the largest
difference of the fills and whether the observed values and flags agree exactly. ``--epochs``
bounds the fit (this measures the prediction, not accuracy).

    python benchmarks/dask_impute.py --shape 1000,1000 --chunk 250 --workers 2 --epochs 2
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

import geogpvae
from geogpvae.datasets import make_gaussian_field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from _requires import require


def _peak_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across fork and exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: KiB, may include the parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="1000,1000", help="grid shape (y, x)")
    p.add_argument("--chunk", type=int, default=250, help="cells along each dim of a block")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    require("benchmarks/dask_impute.py", {"distributed": "distributed"}, extra="dask")
    from distributed import Client, LocalCluster

    shape = tuple(int(s) for s in args.shape.split(","))
    print(f"{platform.machine()}, {args.workers} workers x 1 thread; {reference_line()}", flush=True)
    ds = make_gaussian_field(shape, n_vars=2, seed=0)
    t = time.perf_counter()
    with warnings.catch_warnings():  # the short budget's warning: accuracy is not measured here
        warnings.simplefilter("ignore")
        imputer = geogpvae.GPVAEImputer(seed=0, progress=False, threads=1, epochs=args.epochs).fit(ds)
    print(f"{np.prod(shape):,} cells, fit ({args.epochs} epochs): {time.perf_counter() - t:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        geogpvae.to_netcdf(imputer.impute(ds), Path(tmp) / "eager.nc")
        print(f"in memory, predicted at the call: {time.perf_counter() - t:.1f} s, "
              f"this process's peak so far {_peak_mib():.0f} MiB", flush=True)
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          local_directory=tmp) as cluster, Client(cluster) as client:
            client.restart()  # fresh worker processes: their peaks are this run's
            t = time.perf_counter()
            out = imputer.impute(ds.chunk({"y": args.chunk, "x": args.chunk}))
            call = time.perf_counter() - t
            geogpvae.to_netcdf(out, Path(tmp) / "lazy.nc")
            secs = time.perf_counter() - t
            peaks = client.run(_peak_mib)
        blocks = int(np.prod([-(-n // args.chunk) for n in shape]))
        print(f"chunked, {blocks} blocks on the cluster: call {call:.1f} s, call and write {secs:.1f} s, "
              f"worker peaks {', '.join(f'{v:.0f}' for v in peaks.values())} MiB", flush=True)
        with xr.open_dataset(Path(tmp) / "eager.nc") as a, xr.open_dataset(Path(tmp) / "lazy.nc") as b:
            for name in imputer.vars_:
                flags = bool((a[f"{name}_imputed"] == b[f"{name}_imputed"]).all())
                observed = (a[f"{name}_imputed"] == 0).values
                same = bool(np.array_equal(a[name].values[observed], b[name].values[observed]))
                diff = float(np.nanmax(np.abs(a[name].values - b[name].values)))
                print(f"{name}: flags equal {flags}, observed values equal {same}, largest fill difference "
                      f"{diff:.2e}", flush=True)


if __name__ == "__main__":
    main()
