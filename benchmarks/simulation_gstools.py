"""Realisations beside GSTools' conditioned random fields on one synthetic variable.

Task: a Gaussian random field on a 48 x 48 grid of 1 km cells (Matérn, smoothness 1.5, length
scale 5 km, variance 1, drawn with GSTools' ``SRF``, seed 20) plus measurement noise of sd 0.1;
70 % of the cells hidden at random (seed 21). Two ensembles of n realisations of the hidden cells:

* geogpvae: ``GPVAEImputer`` with the package defaults, ``simulate(ds, n)``;
* GSTools: a Matérn variogram of the truth's smoothness with variance, length scale and nugget
  fitted to the observed values' empirical variogram (1 km bins to 20 km), ordinary kriging,
  ``gstools.CondSRF``, one seed per realisation.

Printed over the hidden cells: RMSE of the ensemble mean, the ensemble CRPS, the coverage of the
ensemble's central 95 % interval (2.5 and 97.5 % quantiles), and the semivariance along x between
hidden cells at lags of 1, 2, 4 and 8 cells for the truth, each ensemble (averaged over its draws)
and geogpvae's mean field (``impute``); then the seconds of each.

    python benchmarks/simulation_gstools.py --threads 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _requires import require

LAGS = (1, 2, 4, 8)
SHAPE = (48, 48)


def make_task():
    """The noisy field, the truth without noise, and the hidden cells."""
    import gstools as gs
    import numpy as np

    y, x = (np.arange(n, dtype=float) for n in SHAPE)
    model = gs.Matern(dim=2, var=1.0, len_scale=5.0, nu=1.5)
    field = gs.SRF(model, seed=20).structured([y, x])
    rng = np.random.default_rng(21)
    observed = field + rng.normal(0.0, 0.1, SHAPE)
    hidden = rng.random(SHAPE) < 0.7
    return y, x, observed, hidden


def gstools_draws(y, x, values, hidden, n: int):
    """CondSRF realisations (n, ny, nx) from a fitted Matérn variogram with a nugget."""
    import gstools as gs
    import numpy as np

    yy, xx = np.meshgrid(y, x, indexing="ij")
    seen = ~hidden
    pos = (yy[seen], xx[seen])
    centres, gamma = gs.vario_estimate(pos, values[seen], np.arange(0.0, 20.5, 1.0))
    model = gs.Matern(dim=2, nu=1.5)  # the truth's smoothness: fitting it too gave nu = 20
    model.fit_variogram(centres, gamma, nu=False, nugget=True)
    krige = gs.krige.Ordinary(model, cond_pos=pos, cond_val=values[seen])
    srf = gs.CondSRF(krige)
    srf.set_pos([y, x], "structured")
    draws = np.stack([srf(seed=100 + i) for i in range(n)])
    return draws, model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=50, help="realisations of each method")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    require("benchmarks/simulation_gstools.py", {"gstools": "gstools"})
    import numpy as np
    import torch
    import xarray as xr

    import geogpvae
    from _machine import reference_line
    from realisation_texture import semivariance
    from simulation import ensemble_crps

    if args.threads:
        torch.set_num_threads(args.threads)
    print(reference_line())
    y, x, values, hidden = make_task()
    truth = values[hidden]
    ds = xr.Dataset({"v": (("y", "x"), np.where(hidden, np.nan, values), {"units": "1"})},
                    coords={"y": ("y", y, {"units": "km"}), "x": ("x", x, {"units": "km"})})
    start = time.perf_counter()
    imputer = geogpvae.GPVAEImputer(progress=False).fit(ds)
    mean = imputer.impute(ds).v.values
    ours = imputer.simulate(ds, args.n, seed=0).v.transpose("realization", "y", "x").values
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    theirs, model = gstools_draws(y, x, values, hidden, args.n)
    t_theirs = time.perf_counter() - start
    print(f"GSTools' fitted variogram: {model}")
    print(f"{'':24}{'RMSE':>8}{'CRPS':>8}{'cov95':>8}" + "".join(f"{'lag ' + str(h):>8}" for h in LAGS) + f"{'s':>8}")
    print(f"{'truth (with noise)':24}{'':24}" + "".join(f"{semivariance(values, hidden, h):8.3f}" for h in LAGS))
    print(f"{'geogpvae mean field':24}{np.sqrt(np.mean((mean[hidden] - truth) ** 2)):8.3f}{'':16}"
          + "".join(f"{semivariance(mean, hidden, h):8.3f}" for h in LAGS))
    for label, draws, seconds in (("geogpvae draws", ours, t_ours), ("GSTools CondSRF", theirs, t_theirs)):
        flat = draws[:, hidden]
        lo, hi = np.quantile(flat, [0.025, 0.975], axis=0)
        rmse = np.sqrt(np.mean((flat.mean(axis=0) - truth) ** 2))
        lags = [np.mean([semivariance(d, hidden, h) for d in draws]) for h in LAGS]
        print(f"{label:24}{rmse:8.3f}{ensemble_crps(flat, truth).mean():8.3f}"
              f"{np.mean((truth >= lo) & (truth <= hi)):8.3f}" + "".join(f"{g:8.3f}" for g in lags)
              + f"{seconds:8.1f}")
    print(f"{args.n} realisations each; geogpvae's seconds include its fit, impute and the draws")


if __name__ == "__main__":
    main()
