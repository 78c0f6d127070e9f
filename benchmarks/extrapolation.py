"""Predictions beyond the survey: how the mean and std behave with the distance to the nearest site.

A kriging user maps a survey on a rectangle that runs past its sites. Ordinary kriging's
prediction there goes back to the survey's mean and its standard deviation to the survey's
spread (plus the nugget). This script measures what ``GPVAEImputer.predict`` does instead.

Task: Jura's 259 prediction-set sites (Cd, Ni, Zn; x, y in km; the 100 validation sites are not
loaded), fitted with the package defaults, model seeds 0, 1, ...; predicted on a 0.25 km grid
over the survey's box widened by 25 km on every side, and at points 50, 100 and 500 km east of
it. The grid's nodes are grouped by their distance to the nearest site. For each group and
variable it prints the mean of the predicted means and of the predicted standard deviations,
beside the training values' mean and standard deviation (what a prediction far from the data
should come back to). Nothing here is scored against held-out values.

    python benchmarks/extrapolation.py --threads 2
    python benchmarks/extrapolation.py --seeds 1 --options '{"epochs": 300}'
"""

from __future__ import annotations

import os
import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from scipy.spatial import cKDTree

import geogpvae
from geogpvae.datasets import load_jura

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line

VARS = ["Cd", "Ni", "Zn"]
#: bands of distance to the nearest training site (km)
BANDS = [(0.0, 0.25), (0.25, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 5.0), (5.0, 10.0), (10.0, 25.0),
         (25.0, 1000.0)]


def _grid(x: np.ndarray, y: np.ndarray, margin: float = 25.0, step: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """The nodes of a regular grid over the sites' box widened by ``margin``, and far points east."""
    gx = np.arange(x.min() - margin, x.max() + margin + step / 2, step)
    gy = np.arange(y.min() - margin, y.max() + margin + step / 2, step)
    xx, yy = np.meshgrid(gx, gy)
    far = x.max() + np.array([50.0, 100.0, 500.0])
    return np.r_[xx.ravel(), far], np.r_[yy.ravel(), np.full(3, y.mean())]


def run(seed: int, options: dict) -> dict:
    jura = load_jura()
    train = jura.isel(site=np.flatnonzero(jura.split.values == "prediction"))[VARS]
    train = train.drop_vars([c for c in train.coords if c not in ("x", "y")])
    gx, gy = _grid(train.x.values, train.y.values)
    nodes = xr.Dataset(coords={"x": ("node", gx, train.x.attrs), "y": ("node", gy, train.y.attrs)})
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the far points warn that they are far: that is the point
        imputer = geogpvae.GPVAEImputer(seed=seed, progress=False, **options).fit(train, VARS)
        pred = imputer.predict(nodes)
    seconds = time.perf_counter() - start
    dist, _ = cKDTree(np.c_[train.x.values, train.y.values]).query(np.c_[gx, gy])
    out = {"seed": seed, "seconds": seconds, "bands": {}, "far": {},
           "training": {v: [float(train[v].mean()), float(train[v].std())] for v in VARS}}
    for lo, hi in BANDS:
        inside = (dist >= lo) & (dist < hi)
        out["bands"][f"{lo:g}-{hi:g}"] = {
            "nodes": int(inside.sum()),
            **{v: [float(pred[v].values[inside].mean()), float(pred[f"{v}_std"].values[inside].mean())]
               for v in VARS}}
    for k, d in enumerate((50, 100, 500)):
        out["far"][f"{d} km east"] = {v: [float(pred[v].values[-3 + k]), float(pred[f"{v}_std"].values[-3 + k])]
                                      for v in VARS}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--options", default="{}", help="GPVAEImputer options as JSON")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    print(reference_line(), flush=True)
    results = [run(seed, json.loads(args.options)) for seed in range(args.seeds)]
    train = results[0]["training"]
    print("training values (259 sites): " + ", ".join(f"{v} {m:.3g} ± {s:.3g}" for v, (m, s) in train.items()))
    print(f"{'nearest site (km)':>18} {'nodes':>6} " + " ".join(f"{v + ' mean ± std':>22}" for v in VARS))
    rows = list(results[0]["bands"]) + list(results[0]["far"])
    for row in rows:
        part = "bands" if row in results[0]["bands"] else "far"
        cells = []
        for v in VARS:
            m = np.mean([r[part][row][v][0] for r in results])
            s = np.mean([r[part][row][v][1] for r in results])
            cells.append(f"{m:10.3g} ± {s:<9.3g}")
        nodes = results[0][part][row].get("nodes", 1)
        print(f"{row:>18} {nodes:>6} " + " ".join(f"{c:>22}" for c in cells))
    print(f"seconds per fit and prediction: {np.mean([r['seconds'] for r in results]):.1f} "
          f"({len(results)} model seeds)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
