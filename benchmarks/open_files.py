"""What the agreement check costs when several files are opened as one field (fields/joining.py).

Writes ``--files`` NetCDF files of a station network, one time slice each (``--stations``
stations, 24 times per file, x/y on the station dim), then times
:func:`geogpvae.fields.io.open_dataset` along ``time``, alternately with the check and without
it (an explicit ``compat="override"`` skips the check, and the join is otherwise the same),
``--rounds`` times each. Prints the median seconds of each and their difference per file.

    python benchmarks/open_files.py                    # 100 and 500 files
    python benchmarks/open_files.py --files 2000 --rounds 2
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

from geogpvae.fields import io


def _write(folder: Path, n_files: int, stations: int) -> list[str]:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 100, stations), rng.uniform(0, 100, stations)
    paths = []
    for k in range(n_files):
        times = np.arange(24.0) + 24 * k
        ds = xr.Dataset({"temperature": (("time", "station"), rng.normal(size=(24, stations)))},
                        coords={"time": times, "x": ("station", x), "y": ("station", y)})
        path = folder / f"part_{k:05d}.nc"
        ds.to_netcdf(path)
        paths.append(str(path))
    return paths


def _seconds(paths: list[str], **options) -> float:
    start = time.perf_counter()
    with io.open_dataset(paths, concat_dim="time", **options) as ds:
        ds.sizes  # noqa: B018 - the join itself, not reading the values
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--stations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}; xarray {xr.__version__}")
    for n in args.files:
        with tempfile.TemporaryDirectory() as tmp:
            paths = _write(Path(tmp), n, args.stations)
            checked, plain = [], []
            for _ in range(args.rounds):  # alternately, so that drift hits both alike
                checked.append(_seconds(paths))
                plain.append(_seconds(paths, compat="override"))
            c, p = statistics.median(checked), statistics.median(plain)
            print(f"{n:>6d} files: with the check {c:7.2f} s, without {p:7.2f} s, "
                  f"{1000 * (c - p) / n:6.2f} ms more per file")


if __name__ == "__main__":
    main()
