"""Realisations: seconds and memory on SPE10, and how they compare with the mean field.

Task: the SPE10 paper task (every second cell of model 2: 43 x 110 x 30 = 141,900 cells; porosity,
log kx, log ky, log kz; half of the values dropped at random, mask seed 1, a tuning mask), fitted
with the package defaults, then ``GPVAEImputer.simulate(ds, n)``. Printed: the fit's and the
draws' seconds, the peak resident memory, and over the dropped values

* the ratio of the draws' pointwise mean and standard deviation to ``impute``'s (about 1);
* the semivariance of log kx between cells one step apart along x (cells both dropped): the
  true field's, the mean field's (smoothed) and the realisations' (their average over draws);
* the cross-semivariance of porosity and log kx one step apart along x (cells dropped in both);
* the ensemble CRPS (mean over values, data units) beside the Gaussian CRPS of ``impute``.

    python benchmarks/simulation.py --threads 2             # 100 realisations
    python benchmarks/simulation.py --threads 2 -n 20 --epochs 20
    python benchmarks/simulation.py --threads 2 -n 20 --downsample 1   # all 1,122,000 cells

Needs the SPE10 files (GEOGPVAE_DATA_DIR).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

import geogpvae
from geogpvae.validation import crps_gaussian

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from spe10 import load_task


def ensemble_crps(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """CRPS of an ensemble (R, M) at each of M values: E|X - y| - E|X - X'| / 2 (sorted form)."""
    r = draws.shape[0]
    xs = np.sort(draws, axis=0)
    first = np.mean(np.abs(xs - truth[None, :]), axis=0)
    weights = (2 * np.arange(1, r + 1) - r - 1)[:, None]
    second = np.sum(weights * xs, axis=0) / (r * r)
    return first - second


def semivariance_x(cube: np.ndarray, pair: np.ndarray) -> float:
    """Half the mean squared difference of cells one step apart along x, where ``pair`` (z, y, x - 1)."""
    d = cube[..., 1:] - cube[..., :-1]
    return 0.5 * float(np.mean(d[pair] ** 2))


def cross_semivariance_x(a: np.ndarray, b: np.ndarray, pair: np.ndarray) -> float:
    """Half the mean product of the one-step increments along x of ``a`` and ``b``, where ``pair``."""
    return 0.5 * float(np.mean(((a[..., 1:] - a[..., :-1]) * (b[..., 1:] - b[..., :-1]))[pair]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=100, help="realisations")
    p.add_argument("--epochs", type=int, default=None, help="training epochs (default: the package's)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--downsample", type=int, default=2, help="2: the paper's 141,900 cells; 1: all 1,122,000")
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        torch.set_num_threads(args.threads)
    print(f"machine: {os.cpu_count()} CPUs, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"geogpvae {geogpvae.__version__}")
    print(reference_line(), flush=True)
    ds, names, truth, keep = load_task(False, 1, downsample=args.downsample)
    work = ds[["porosity"]].copy()
    for c, n in enumerate(names):
        work[n] = (("z", "y", "x"), np.where(keep[..., c], truth[..., c], np.nan))
    work = work[names]
    t = time.perf_counter()
    imp = geogpvae.GPVAEImputer(epochs=args.epochs, seed=0, progress=False).fit(work, names)
    fit_s = time.perf_counter() - t
    mean = imp.impute(work)
    t = time.perf_counter()
    sims = imp.simulate(work, args.n)
    sim_s = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"fit {fit_s:.1f} s; {args.n} realisations {sim_s:.1f} s; peak resident memory {peak:.2f} GiB")
    print(f"{'channel':10} {'mean ratio':>10} {'sd ratio':>9} {'CRPS draws':>11} {'CRPS impute':>12}")
    for c, n in enumerate(names):
        gap = ~keep[..., c]
        d = sims[n].transpose("realization", "z", "y", "x").values
        m, s = mean[n].transpose("z", "y", "x").values, mean[f"{n}_std"].transpose("z", "y", "x").values
        ratio_m = np.mean(np.abs(d.mean(0)[gap] - m[gap]) / s[gap])
        ratio_s = np.mean(d.std(0)[gap] / s[gap])
        crps_d = float(np.mean(ensemble_crps(d[:, gap], truth[..., c][gap])))
        crps_m = float(np.mean(crps_gaussian(m[gap], s[gap], truth[..., c][gap])))
        print(f"{n:10} {ratio_m:10.3f} {ratio_s:9.3f} {crps_d:11.4f} {crps_m:12.4f}   "
              "(mean ratio: |mean of draws - impute| / impute sd)")
    c = names.index("log_kx")
    pair = ~keep[..., 1:, c] & ~keep[..., :-1, c]
    d = sims["log_kx"].transpose("realization", "z", "y", "x").values
    print(f"log kx semivariance at one cell along x, dropped pairs: truth {semivariance_x(truth[..., c], pair):.3f}, "
          f"mean field {semivariance_x(mean.log_kx.transpose('z', 'y', 'x').values, pair):.3f}, "
          f"realisations {np.mean([semivariance_x(r, pair) for r in d]):.3f}")
    p_ = names.index("porosity")
    both = pair & ~keep[..., 1:, p_] & ~keep[..., :-1, p_]
    dp = sims["porosity"].transpose("realization", "z", "y", "x").values
    mp, mk = (mean[n].transpose("z", "y", "x").values for n in ("porosity", "log_kx"))
    print(f"porosity x log kx cross-semivariance at one cell along x, pairs dropped in both: truth "
          f"{cross_semivariance_x(truth[..., p_], truth[..., c], both):.4f}, mean field "
          f"{cross_semivariance_x(mp, mk, both):.4f}, realisations "
          f"{np.mean([cross_semivariance_x(a, b, both) for a, b in zip(dp, d)]):.4f}")


if __name__ == "__main__":
    main()
