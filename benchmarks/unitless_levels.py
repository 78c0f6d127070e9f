"""Levels without length units beside longitude/latitude: an ocean s-coordinate.

A new-user pass (an ocean modeller with ROMS-like output) found
surface gaps filled from the level below: the s-coordinate ``s_rho`` (numbers in [-1, 0], no
units) sits beside longitude/latitude in km, so every location's nearest neighbours are the
levels of its own column. geogpvae now warns and names the scale that makes one level as far
as one place (:mod:`geogpvae.fields.scales`). This script builds such a field and scores the
surface gaps with the package defaults and with that scale:

* a curvilinear grid (2-D ``lon_rho``/``lat_rho``, about 28 km between places), ``--times``
  time steps, three s-levels whose temperatures differ by 2 degC from one to the next;
* land in one corner (given as ``mask_rho``); patches missing at the surface only.

    python benchmarks/unitless_levels.py                 # the package defaults (epochs=None)
    python benchmarks/unitless_levels.py --epochs 20     # a quick look
"""

from __future__ import annotations

import os
import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae
from geogpvae.fields.scales import unitless_axes
from geogpvae.fields.stacking import prepare_field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line


def roms_like(times: int, seed: int) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
    """The field (surface patches missing), the truth, and where the surface gaps are."""
    rng = np.random.default_rng(seed)
    eta, xi = np.meshgrid(np.arange(15), np.arange(20), indexing="ij")
    lon, lat = 140 + 0.3 * xi + 0.08 * eta, 30 + 0.25 * eta - 0.04 * xi
    land = (xi > 13) & (eta > 8)
    s = np.array([-5 / 6, -1 / 2, -1 / 6])
    truth = (18 + 6 * s[None, :, None, None] + np.sin(lon / 3.0) + np.cos(lat / 2.0)
             + 0.3 * np.arange(times)[:, None, None, None])
    gaps = np.zeros((times, 15, 20), bool)
    for t in range(times):  # two patches a time step, at random places
        for _ in range(2):
            e, x = rng.integers(0, 10), rng.integers(0, 14)
            gaps[t, e : e + 4, x : x + 5] = True
    gaps &= ~land[None]
    temp = truth.copy()
    temp[:, :, land] = np.nan
    temp[:, -1][gaps] = np.nan
    ds = xr.Dataset(
        {"temp": (("ocean_time", "s_rho", "eta_rho", "xi_rho"), temp.astype(np.float32), {"units": "Celsius"}),
         "mask_rho": (("eta_rho", "xi_rho"), (~land).astype(float))},
        coords={"ocean_time": ("ocean_time", np.arange(times) * 86400.0, {"units": "seconds since 2001-01-01"}),
                "s_rho": ("s_rho", s, {"standard_name": "ocean_s_coordinate_g2", "positive": "up"}),
                "lon_rho": (("eta_rho", "xi_rho"), lon, {"units": "degree_east"}),
                "lat_rho": (("eta_rho", "xi_rho"), lat, {"units": "degree_north"})},
    )
    where = np.zeros(truth.shape, bool)
    where[:, -1] = gaps
    return xr.decode_cf(ds), truth, where


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--times", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
    # the engine is imported looks like torch's default to it
    torch.set_num_threads(args.threads)
    ds, truth, where = roms_like(args.times, args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        field = prepare_field(ds, ["temp"], mask="mask_rho")
    ((name, step, spacing),) = unitless_axes(field.geometry, field.x)
    print(reference_line(), flush=True)
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, geogpvae {geogpvae.__version__}; "
          f"field {dict(ds.temp.sizes)}, seed {args.seed}, {int(where.sum())} surface gaps; "
          f"{name} step {step:.3g} beside places {spacing:.3g} km apart")
    for label, scale in (("defaults", None), (f"coord_scale {name}={spacing / step:.3g}", spacing / step)):
        options = {"epochs": args.epochs, "seed": 0, "progress": False}
        if scale is not None:
            options["coord_scale"] = {name: scale}
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = geogpvae.impute(ds, vars=["temp"], mask="mask_rho", **options)
        seconds = time.perf_counter() - start
        err = out.temp.values[where] - truth[where]
        std = out.temp_std.values[where]
        print(f"{label:28s} RMSE {np.sqrt(np.mean(err ** 2)):.3f}  mean error {err.mean():+.3f}  "
              f"cov95 {np.mean(np.abs(err) <= 1.96 * std):.3f}  {seconds:.1f} s")


if __name__ == "__main__":
    main()
