"""Realisations of a smooth field inside a hole: is a draw as rough as the field?

Task: a synthetic Gaussian-process field (``make_gaussian_field``, 40 x 40 cells, two variables,
noise sd 0.05, a fifth of the cells missing at random, seed 3) with a 16 x 16 hole cut in the
middle of both variables; fitted with the package defaults, then ``impute`` and
``simulate(ds, n)``. Printed: the semivariance of v0 along x between cells both inside the hole,
at several lags, for the true field, the mean field and each realisation.

    python benchmarks/realisation_texture.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import geogpvae
from geogpvae.datasets import make_gaussian_field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line

LAGS = (1, 2, 5, 10)


def semivariance(values: np.ndarray, inside: np.ndarray, lag: int) -> float:
    """Half the mean squared difference of cells ``lag`` apart along x, both ``inside``."""
    both = inside[:, lag:] & inside[:, :-lag]
    return 0.5 * float(np.mean((values[:, lag:] - values[:, :-lag])[both] ** 2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=4, help="realisations")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"machine: {os.cpu_count()} CPUs, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"geogpvae {geogpvae.__version__}")
    print(reference_line(), flush=True)
    ds, truth = make_gaussian_field((40, 40), n_vars=2, missing=0.2, seed=3, return_truth=True)
    inside = np.zeros(ds.v0.shape, dtype=bool)
    inside[12:28, 12:28] = True
    ds = ds.assign({v: ds[v].where(~ds[v].copy(data=inside)) for v in ("v0", "v1")})
    start = time.perf_counter()
    imputer = geogpvae.GPVAEImputer(progress=False).fit(ds)
    mean = imputer.impute(ds)
    draws = imputer.simulate(ds, args.n, seed=1)
    print(f"fit, impute and {args.n} realisations: {time.perf_counter() - start:.1f} s")
    err = (mean.v0.values - truth.v0.values)[inside]
    std = mean.v0_std.values[inside]
    print(f"v0 in the hole: RMSE {np.sqrt(np.mean(err**2)):.3f}, mean v0_std {std.mean():.3f}, "
          f"cov95 {np.mean(np.abs(err) < 1.959964 * std):.3f}")
    engine = imputer.engine_
    print(f"latent lengthscales (cells) {np.round(engine.model.kernel.lengthscale.detach().numpy(), 2).tolist()}; "
          f"calibration factors {np.round(engine.calibration_, 2).tolist()}; sources {engine.predict_mode_}")
    print(f"{'semivariance of v0 in the hole':32}" + "".join(f"{'lag ' + str(h):>9}" for h in LAGS))
    rows = [("true field", truth.v0.values), ("mean field (impute)", mean.v0.values)]
    rows += [(f"realisation {i}", draws.v0.isel(realization=i).values) for i in range(args.n)]
    for label, values in rows:
        print(f"{label:32}" + "".join(f"{semivariance(values, inside, h):9.3f}" for h in LAGS))


if __name__ == "__main__":
    main()
