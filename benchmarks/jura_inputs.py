"""Jura: the GPVAE's Cd predictions at the validation sites against its inputs, without their truth.

A diagnostic for the gap between the tuning split (where the GPVAE is level with the best
references) and the 100 validation sites (where it is behind them): it fits the scored task
(``benchmarks/jura.py``'s, Cd hidden at the validation sites) and prints how the predictions
spread, which validation sites have Ni or Zn outside the training sites' range and what is
predicted there, and how far the predictions are from a linear regression of Cd on log Ni and
log Zn. No validation Cd value is read.

    python benchmarks/jura_inputs.py --threads 2 --seed 0
"""

from __future__ import annotations

import os
import argparse
import sys
from pathlib import Path

import numpy as np
import torch

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jura import task


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0, help="model seed")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    ds, work, val, _ = task()  # the truth is not used
    out = geogpvae.impute(work, vars=["Ni", "Zn", "Cd"], neighbours=10, seed=args.seed, progress=False)
    pred, sd = out.Cd.values[val], out.Cd_std.values[val]
    cd = ds.Cd.values[~val]
    ni, zn = ds.Ni.values, ds.Zn.values
    print(f"training Cd (mg/kg): mean {cd.mean():.3f}, sd {cd.std():.3f}, range {cd.min():.3f}-{cd.max():.3f}")
    print(f"predicted Cd at the validation sites: mean {pred.mean():.3f}, sd {pred.std():.3f}, "
          f"range {pred.min():.3f}-{pred.max():.3f}; predictive sd median {np.median(sd):.3f}")
    outside = (zn[val] > zn[~val].max()) | (zn[val] < zn[~val].min()) | (ni[val] > ni[~val].max()) | (ni[val] < ni[~val].min())
    for i in np.flatnonzero(outside):
        print(f"  validation site with Ni {ni[val][i]:.1f}, Zn {zn[val][i]:.1f} (training Ni {ni[~val].min():.1f}-"
              f"{ni[~val].max():.1f}, Zn {zn[~val].min():.1f}-{zn[~val].max():.1f}): predicted {pred[i]:.2f} ± {sd[i]:.2f}")
    feats = np.column_stack([np.ones(len(zn)), np.log(ni), np.log(zn)])
    coef, *_ = np.linalg.lstsq(feats[~val], ds.Cd.values[~val], rcond=None)
    linear = feats[val] @ coef
    print(f"against a linear regression on log Ni, log Zn: correlation {np.corrcoef(pred, linear)[0, 1]:.3f}, "
          f"mean absolute difference {np.mean(np.abs(pred - linear)):.3f}")


if __name__ == "__main__":
    main()
