"""How much easier calibration's held-out values are than the values a fit is asked to fill.

Calibration hides observed values the model trained on, predicts them from the rest and scales
each variable's variance by their mean squared z-score (the *factor*). If those values are as
hard to predict as the real targets, the targets' mean squared z-score after calibration is
about 1. This script prints both, fold by fold, on Jura's tuning folds (the 259 prediction-set
sites; the 100 validation sites are never loaded): Cd hidden in 5 random folds (``--split cv``)
or in 5 folds of square blocks whose hidden sites lie as far from the nearest visible site as
the validation sites do (``--split matched``, the folds of ``real_surveys.py``).

Per fold: whether the engine judged Cd's gaps clustered (their check and calibration values then
lie in gaps of the same shape), the chosen KL factor, Cd's calibration factor for locations with
values of their own (Ni, Zn) and without, the targets' RMSE, cov95 and mean squared z-score under
the calibrated spread. A mean squared z-score well above 1 with a factor below 1 says the
held-out values were easier than the targets. Nothing here is a scored split.

    python benchmarks/calibration_gap.py --threads 2 --split matched
    python benchmarks/calibration_gap.py --threads 2 --split cv --seeds 2
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

import geogpvae
from geogpvae.datasets import load_jura

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from real_surveys import FOLDS, block_folds, nearest_distance, random_folds


def folds_for(split: str) -> tuple[xr.Dataset, np.ndarray]:
    """The 259 prediction-set sites and each one's fold."""
    ds = load_jura()
    val = ds.split.values == "validation"
    x = np.column_stack([ds.x.values, ds.y.values])
    train = ds.isel(site=np.flatnonzero(~val))
    if split == "matched":  # geometry of the validation sites only, never their values
        folds, _, _ = block_folds(x[~val], float(np.median(nearest_distance(x[~val], x[val]))), seed=0)
    else:
        folds = random_folds(int((~val).sum()))
    return train, folds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", choices=("cv", "matched"), default="matched")
    p.add_argument("--seeds", type=int, default=1, help="model seeds")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    print(reference_line(), flush=True)
    train, folds = folds_for(args.split)
    cd = train.Cd.values.astype(float)
    z2_all, factors = [], []
    for seed in range(args.seeds):
        for f in range(FOLDS):
            hide = folds == f
            work = train[["Ni", "Zn", "Cd"]].copy(deep=True)
            work["Cd"] = work.Cd.where(xr.DataArray(~hide, dims="site"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = geogpvae.GPVAEImputer(seed=seed, progress=False, threads=args.threads)
                out = imp.fit(work, ["Ni", "Zn", "Cd"]).impute(work)
            eng = imp.engine_
            j = eng.names.index("Cd")
            m, s = out.Cd.values[hide], out.Cd_std.values[hide]
            z2 = ((cd[hide] - m) / s) ** 2
            z2_all.append(z2)
            factors.append(eng.calibration_[0, j])
            print(f"seed {seed} fold {f}: clustered {bool(eng.clustered_gaps_[j])}, KL factor {eng.kl_factor_:g}, "
                  f"Cd factor with / without own values {eng.calibration_[0, j]:.3f} / {eng.calibration_[1, j]:.3f}; "
                  f"targets RMSE {np.sqrt(np.mean((m - cd[hide]) ** 2)):.4f}, cov95 {np.mean(z2 < 1.96**2):.3f}, "
                  f"mean z^2 {np.mean(z2):.3f}", flush=True)
    z2 = np.concatenate(z2_all)
    print(f"all folds: Cd factors {min(factors):.3f}-{max(factors):.3f} (mean {np.mean(factors):.3f}); "
          f"targets' mean z^2 {np.mean(z2):.3f}, cov95 {np.mean(z2 < 1.96**2):.3f}")


if __name__ == "__main__":
    main()
