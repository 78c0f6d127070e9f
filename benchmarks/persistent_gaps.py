"""Gaps that stay in place month after month: a synthetic monthly SST field on the globe.

A new-user pass found that patches missing in every month of a
(time, lat, lon) field were filled with about the global mean, far from the truth, while a
per-month neighbour average filled them well. This script rebuilds such a field and scores
``geogpvae.impute`` on it by kind of gap (RMSE, the Gaussian NLL of the fill and its std in
nats per value, cov95 and the mean squared z-score ``z2``), against that baseline:

* SST = 28 - 25 sin^2(lat) plus smooth anomalies that change with the month (degC), on a
  regular grid (lat descending, lon 0..360), ``--months`` months;
* land (a few caps and Antarctica) NaN in every month, given to the model as ``mask``;
* cloud gaps: ``--random-gap`` of the cells at random, four random caps per month (they move
  from month to month), and three caps missing in every month (over the North Pole, across
  lon 0 at 60 N, across the dateline; left out with ``--no-persistent``).

Field seeds 100 and up are tuning fields; no seed is a scored split yet. Options as JSON.

    python benchmarks/persistent_gaps.py                        # 3 degrees, 3 months, seed 100
    python benchmarks/persistent_gaps.py '{"epochs": 180}'
    python benchmarks/persistent_gaps.py --res 6 --months 3
    python benchmarks/persistent_gaps.py --validate            # what geogpvae.validate reads

``--validate`` also runs :func:`geogpvae.validate` on the field (a tenth held out, at random
and in gaps shaped like the real ones) and prints its RMSE, cov95 and z2 beside the real gaps'.
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line


def _unit_vectors(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    la, lo = np.meshgrid(np.radians(lat), np.radians(lon), indexing="ij")
    return np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)


def _cap(points: np.ndarray, lat0: float, lon0: float, radius: float) -> np.ndarray:
    """Cells within ``radius`` degrees of great circle from (lat0, lon0)."""
    centre = _unit_vectors(np.array([lat0]), np.array([lon0]))[0, 0]
    return points @ centre > np.cos(np.radians(radius))


#: the caps missing in every month: name, (lat, lon, radius in degrees)
PERSISTENT = {"north pole": (88.0, 0.0, 6.0), "across lon 0 at 60 N": (60.0, 0.0, 10.0),
              "across the dateline": (-5.0, 180.0, 8.0)}


def sst_field(res: float, months: int, seed: int, random_gap: float,
              persistent_caps: bool = True) -> tuple[xr.Dataset, np.ndarray, dict]:
    """The observed field (with ``sea`` mask), the truth, and boolean masks of the gap kinds
    (every gap, the caps that move from month to month, and each persistent cap if
    ``persistent_caps``)."""
    rng = np.random.default_rng(seed)
    lat, lon = np.arange(90 - res / 2, -90, -res), np.arange(0, 360, res)
    points = _unit_vectors(lat, lon)
    la, lo = np.meshgrid(np.radians(lat), np.radians(lon), indexing="ij")
    land = (_cap(points, 45, 100, 25) | _cap(points, 10, 20, 18) | _cap(points, 40, 260, 20)
            | _cap(points, -25, 135, 14) | _cap(points, 50, 5, 9) | (la < np.radians(-72)))
    truth = np.empty((months, lat.size, lon.size))
    for m in range(months):
        phase = 2 * np.pi * m / 12 + rng.uniform(0, 0.5)
        truth[m] = (28 - 25 * np.sin(la) ** 2 + 1.5 * np.sin(2 * lo + phase) * np.cos(la) ** 2
                    + np.cos(3 * la + lo - phase) + 0.8 * np.sin(la) * np.cos(phase)
                    + 0.6 * np.sin(5 * lo) * np.cos(la) ** 3)
    truth[:, land] = np.nan
    persistent = {name: _cap(points, *where) & ~land for name, where in PERSISTENT.items()}
    cloud = rng.random(truth.shape) < random_gap
    moving = np.zeros(truth.shape, dtype=bool)
    for m in range(months):
        for _ in range(4):  # drawn whether or not the persistent caps are kept: the same field
            moving[m] |= _cap(points, rng.uniform(-60, 60), rng.uniform(0, 360), rng.uniform(5, 12))
        if persistent_caps:
            for where in persistent.values():
                cloud[m] |= where
    if not persistent_caps:
        persistent = {}
    cloud = (cloud | moving) & ~land[None]
    observed = np.where(cloud, np.nan, truth)
    ds = xr.Dataset(
        {"sst": (("time", "lat", "lon"), observed, {"units": "degC", "standard_name": "sea_surface_temperature"}),
         "sea": (("lat", "lon"), (~land).astype(np.int8))},
        coords={"time": np.datetime64("2020-01-15") + 30 * np.arange(months).astype("timedelta64[D]"),
                "lat": ("lat", lat, {"units": "degrees_north"}), "lon": ("lon", lon, {"units": "degrees_east"})},
    )
    kinds = {"every gap": cloud, "caps that move": moving & ~land[None]}
    kinds.update({name: cloud & where[None] for name, where in persistent.items()})
    return ds, truth, kinds


def neighbour_average(month: np.ndarray, sea: np.ndarray, sweeps: int = 3000) -> np.ndarray:
    """A month's gaps filled by repeated averaging of their four neighbours (lon periodic)."""
    filled = month.copy()
    hole = np.isnan(month) & sea
    filled[hole] = np.nanmean(month)
    for _ in range(sweeps):
        inside = np.where(sea, filled, np.nan)
        padded = np.pad(inside, ((1, 1), (0, 0)), constant_values=np.nan)
        around = np.stack([padded[:-2], padded[2:], np.roll(inside, 1, 1), np.roll(inside, -1, 1)])
        with warnings.catch_warnings():  # cells with no sea neighbour yet: all-NaN means
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(around, 0)
        filled[hole] = np.where(np.isfinite(mean[hole]), mean[hole], filled[hole])
    return filled


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("options", nargs="?", default="{}", help="geogpvae.impute options as JSON")
    p.add_argument("--res", type=float, default=3.0, help="grid step in degrees")
    p.add_argument("--months", type=int, default=3)
    p.add_argument("--seed", type=int, default=100, help="field seed (100 and up: tuning fields)")
    p.add_argument("--random-gap", type=float, default=0.15)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-persistent", action="store_true",
                   help="no caps missing in every month: only the random cells and the caps that move")
    p.add_argument("--validate", action="store_true", help="also run geogpvae.validate (random, shaped)")
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
    # the engine is imported looks like torch's default to it
    torch.set_num_threads(args.threads)
    options = json.loads(args.options)
    ds, truth, kinds = sst_field(args.res, args.months, args.seed, args.random_gap, not args.no_persistent)
    print(reference_line(), flush=True)
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, geogpvae {geogpvae.__version__}; "
          f"field {dict(ds.sst.sizes)}, seed {args.seed}; options {json.dumps(options)}")
    start = time.perf_counter()
    out = geogpvae.impute(ds, vars=["sst"], mask="sea", progress=False, **{"seed": 0, **options})
    seconds = time.perf_counter() - start
    sea = ds.sea.values.astype(bool)
    base = np.stack([neighbour_average(m, sea) for m in ds.sst.values])
    fill, std = out.sst.values, out.sst_std.values
    print(f"impute {seconds:.1f} s; beta chosen x{out.attrs.get('geogpvae_kl_factor')}, "
          f"clustered gaps {out.attrs.get('geogpvae_clustered_gaps')}; "
          f"sources {out.attrs.get('geogpvae_predict_mode_chosen')}")
    print(f"{'gaps':24s} {'n':>6s} {'RMSE':>7s} {'NLL':>7s} {'cov95':>6s} {'z2':>6s} "
          f"{'RMSE of the neighbour average':>30s}")
    for name, where in kinds.items():
        err = fill[where] - truth[where]
        z2 = float(np.mean((err / std[where]) ** 2))
        nll = float(np.mean(0.5 * np.log(2 * np.pi * std[where] ** 2) + 0.5 * (err / std[where]) ** 2))
        cov = float(np.mean(np.abs(err) <= 1.96 * std[where]))
        base_rmse = float(np.sqrt(np.mean((base[where] - truth[where]) ** 2)))
        print(f"{name:24s} {int(where.sum()):6d} {float(np.sqrt(np.mean(err ** 2))):7.3f} {nll:7.3f} {cov:6.3f} {z2:6.2f} "
              f"{base_rmse:30.3f}")
    if args.validate:
        for gaps in ("random", "shaped"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scores = geogpvae.validate(ds, ["sst"], gaps=gaps, mask="sea", **{"seed": 0, **options})
            row = scores.sel(variable="sst")
            print(f"validate, gaps={gaps}: n {int(row.n)}, RMSE {float(row.rmse):.3f}, "
                  f"cov95 {float(row.cov95):.3f}, z2 {float(row.z2):.2f}")


if __name__ == "__main__":
    main()
