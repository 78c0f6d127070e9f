"""One scattered variable predicted at new sites: GPVAE against ordinary kriging (issue 10, item 4).

Tasks:

* **synthetic**: an exact draw of a zero-mean Matérn-3/2 GP on the unit square (variance 1,
  lengthscale 0.2) plus a small nugget (variance 0.01, the measurement noise), at 300 training
  sites and 300 new sites, all uniform at random; the new sites are scored against the noisy
  values. One field per field seed; scored field seeds 0, 1, ... (``--seeds``), the tuning
  split is field seeds from 1000 on (``--split tune``), which nothing scored ever uses.
* **jura**: Cd alone with its x, y (km): trained on the 259 prediction-set sites, predicted at
  the 100 validation sites (mg/kg). ``--split tune`` instead scores 5-fold cross-validation
  inside the 259 training sites (the validation sites are not even loaded into the task).

Methods, on the same training values:

* **GPVAE** through the public API: ``GPVAEImputer(seed=s, **options).fit(train, "v")`` and
  ``.predict(new_sites)``; package defaults unless ``--options`` says otherwise; model seeds
  0, 1, ... (synthetic: one model seed per field, the field's index).
* **ordinary kriging** (PyKrige ``OrdinaryKriging``), its variogram fitted by PyKrige's
  default least squares to the empirical variogram of the training sites, for each of the
  spherical, exponential and Gaussian models; and the row **OK, CV-chosen model**: the model
  with the lowest 5-fold cross-validated RMSE inside the training sites (a rule that never
  looks at the scored values). Predictive variance: the kriging variance.
* **exact GP, maximum likelihood**: scikit-learn's ``GaussianProcessRegressor`` with a
  Matérn-3/2 kernel, a constant and a nugget fitted by the marginal likelihood of the
  training values: what a GP with the right hyperparameters does, next to the GPVAE's.
* for scale: the mean of the training values (with their standard deviation), and on the
  synthetic task the **exact GP with the true covariance** (the best any method can do on
  average).

Scores: RMSE, mean Gaussian negative log-likelihood with the predictive mean and standard
deviation (nats), 95 % coverage, seconds per fit and prediction.

    python benchmarks/kriging.py --threads 2                  # both tasks, scored split
    python benchmarks/kriging.py --task jura --split tune     # Jura CV inside the 259 sites
    python benchmarks/kriging.py --task synthetic --seeds 3 --options '{"neighbours": 10}'

Needs the ``bench`` extra (PyKrige, scikit-learn) and, for Jura, the data files (GEOGPVAE_DATA_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _requires import require

Z95 = 1.959964
VARIOGRAMS = ("spherical", "exponential", "gaussian")
SYN = dict(n_train=300, n_new=300, lengthscale=0.2, nugget=0.01)
TUNE_SEED0 = 1000  # synthetic tuning fields: seeds 1000, 1001, ...
FOLDS = 5


def scores(mean: np.ndarray, std: np.ndarray | None, truth: np.ndarray) -> dict[str, float]:
    err = mean - truth
    out = {"rmse": float(np.sqrt(np.mean(err**2)))}
    if std is not None:
        std = np.maximum(std, 1e-12)
        out["nll"] = float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * (err / std) ** 2))
        out["cov95"] = float(np.mean(np.abs(err) < Z95 * std))
    return out


# ---------------------------------------------------------------------------- tasks
# a task is a list of splits: (x_train (N, 2), v_train (N,), x_new (M, 2), v_new (M,), model seed)
def matern32(d: np.ndarray, lengthscale: float) -> np.ndarray:
    r = np.sqrt(3.0) * d / lengthscale
    return (1.0 + r) * np.exp(-r)


def synthetic_split(seed: int) -> tuple[np.ndarray, ...]:
    """One exact Matérn-3/2 field with a nugget, at training and new sites."""
    rng = np.random.default_rng(seed)
    n = SYN["n_train"] + SYN["n_new"]
    x = rng.uniform(0.0, 1.0, size=(n, 2))
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    cov = matern32(d, SYN["lengthscale"]) + 1e-10 * np.eye(n)
    f = np.linalg.cholesky(cov) @ rng.standard_normal(n)
    v = f + np.sqrt(SYN["nugget"]) * rng.standard_normal(n)
    tr = np.arange(n) < SYN["n_train"]
    return x[tr], v[tr], x[~tr], v[~tr]


def synthetic_task(seeds: int, split: str) -> list[tuple]:
    first = TUNE_SEED0 if split == "tune" else 0
    return [(*synthetic_split(first + i), i) for i in range(seeds)]


def jura_task(seeds: int, split: str) -> list[tuple]:
    from geogpvae.datasets import load_jura

    ds = load_jura()
    val = ds.split.values == "validation"
    x = np.column_stack([ds.x.values, ds.y.values])
    cd = ds.Cd.values.astype(float)
    if split == "score":
        return [(x[~val], cd[~val], x[val], cd[val], s) for s in range(seeds)]
    xt, vt = x[~val], cd[~val]  # the validation sites never enter the tuning split
    folds = np.random.default_rng(0).permutation(len(xt)) % FOLDS
    return [(xt[folds != f], vt[folds != f], xt[folds == f], vt[folds == f], s)
            for s in range(seeds) for f in range(FOLDS)]


# ---------------------------------------------------------------------------- references
def ordinary_kriging(xt, vt, xn, model: str) -> tuple[np.ndarray, np.ndarray]:
    from pykrige.ok import OrdinaryKriging

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = OrdinaryKriging(xt[:, 0], xt[:, 1], vt, variogram_model=model)
        m, v = ok.execute("points", xn[:, 0], xn[:, 1])
    return np.asarray(m, dtype=float), np.sqrt(np.maximum(np.asarray(v, dtype=float), 0.0))


def cv_rmse(xt, vt, model: str, seed: int = 0) -> float:
    """5-fold cross-validated RMSE of ordinary kriging inside the training sites."""
    folds = np.random.default_rng(seed).permutation(len(xt)) % FOLDS
    sq = []
    for f in range(FOLDS):
        m, _ = ordinary_kriging(xt[folds != f], vt[folds != f], xt[folds == f], model)
        sq.append((m - vt[folds == f]) ** 2)
    return float(np.sqrt(np.mean(np.concatenate(sq))))


def kriging_rows(xt, vt, xn, vn) -> dict[str, dict[str, float]]:
    rows, cv = {}, {}
    for model in VARIOGRAMS:
        t = time.perf_counter()
        m, s = ordinary_kriging(xt, vt, xn, model)
        rows[f"OK, {model}"] = {**scores(m, s, vn), "seconds": time.perf_counter() - t}
        cv[model] = cv_rmse(xt, vt, model)
    best = min(cv, key=cv.get)
    rows["OK, CV-chosen model"] = {**rows[f"OK, {best}"], "chosen": best}
    return rows


def oracle_rows(xt, vt, xn, vn) -> dict[str, dict[str, float]]:
    """The exact GP with the generating covariance (synthetic only)."""
    t = time.perf_counter()
    ls, nug = SYN["lengthscale"], SYN["nugget"]
    dtt = np.sqrt(((xt[:, None] - xt[None]) ** 2).sum(-1))
    dnt = np.sqrt(((xn[:, None] - xt[None]) ** 2).sum(-1))
    k = matern32(dtt, ls) + nug * np.eye(len(xt))
    ks = matern32(dnt, ls)
    c = np.linalg.cholesky(k)
    a = np.linalg.solve(c, ks.T)
    mean = a.T @ np.linalg.solve(c, vt)
    var = 1.0 + nug - (a**2).sum(0)
    return {"exact GP, true covariance": {**scores(mean, np.sqrt(var), vn), "seconds": time.perf_counter() - t}}


def ml_gp_row(xt, vt, xn, vn) -> dict[str, dict[str, float]]:
    """An exact GP fitted by maximum likelihood: Matérn-3/2 times a constant, plus a nugget.

    scikit-learn's ``GaussianProcessRegressor`` on the centred training values, the marginal
    likelihood maximised from the median distance to the 10th neighbour (lengthscale), half the
    variance (signal) and a third of it (nugget), with 3 restarts (``random_state=0``). Only the
    training values choose the hyperparameters, as for kriging's variogram.
    """
    from scipy.spatial import cKDTree
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    t = time.perf_counter()
    mu, var = float(vt.mean()), float(vt.var())
    start = float(np.median(cKDTree(xt).query(xt, k=11)[0][:, 10]))
    kernel = (ConstantKernel(var / 2, (1e-3 * var, 10 * var)) * Matern(start, (1e-4 * start, 1e3 * start), nu=1.5)
              + WhiteKernel(var / 3, (1e-6 * var, 2 * var)))
    gp = GaussianProcessRegressor(kernel, n_restarts_optimizer=3, random_state=0).fit(xt, vt - mu)
    mean, std = gp.predict(xn, return_std=True)
    rec = {**scores(mean + mu, std, vn), "seconds": time.perf_counter() - t,
           "lengthscale": float(gp.kernel_.k1.k2.length_scale), "noise": float(gp.kernel_.k2.noise_level)}
    return {"exact GP, Matérn-3/2 + nugget, maximum likelihood": rec}


def mean_row(vt, vn) -> dict[str, dict[str, float]]:
    """The mean and standard deviation of the training values, everywhere."""
    rec = scores(np.full_like(vn, vt.mean()), np.full_like(vn, vt.std()), vn)
    return {"mean of the training values": {**rec, "seconds": 0.0}}


# ---------------------------------------------------------------------------- GPVAE
def as_dataset(x: np.ndarray, v: np.ndarray | None = None) -> xr.Dataset:
    coords = {"x": ("site", x[:, 0]), "y": ("site", x[:, 1])}
    data = {} if v is None else {"v": ("site", v)}
    return xr.Dataset(data, coords=coords)


def gpvae_row(xt, vt, xn, vn, seed: int, options: dict) -> dict[str, float]:
    t = time.perf_counter()
    imputer = geogpvae.GPVAEImputer(seed=seed, progress=False, coords=["x", "y"], **options)
    out = imputer.fit(as_dataset(xt, vt), "v").predict(as_dataset(xn))
    rec = {**scores(out.v.values, out.v_std.values, vn), "seconds": time.perf_counter() - t}
    eng = imputer.engine_
    rec["lengthscale"] = float(eng.model.kernel.lengthscale.detach().double().mean())
    rec["noise"] = float(eng.model.noise_var.detach().double().mean() * eng.scale[0] ** 2)
    mode = eng.predict_mode_
    rec["source"] = mode.get("unobserved", "?") if isinstance(mode, dict) else str(mode)
    return rec


# ---------------------------------------------------------------------------- run
def run_task(splits: list[tuple], options: dict, with_oracle: bool,
             log: Callable[[str], None]) -> dict[str, list[dict[str, float]]]:
    rows: dict[str, list[dict[str, float]]] = {}
    for i, (xt, vt, xn, vn, seed) in enumerate(splits):
        recs = {"GPVAE (package defaults" + (f", {json.dumps(options)}" if options else "") + ")":
                gpvae_row(xt, vt, xn, vn, seed, options)}
        recs.update(kriging_rows(xt, vt, xn, vn))
        with warnings.catch_warnings():  # convergence notes of the optimiser at a bound
            warnings.simplefilter("ignore")
            recs.update(ml_gp_row(xt, vt, xn, vn))
        if with_oracle:
            recs.update(oracle_rows(xt, vt, xn, vn))
        recs.update(mean_row(vt, vn))
        for name, rec in recs.items():
            rows.setdefault(name, []).append(rec)
        gp = next(iter(recs.values()))
        log(f"  split {i + 1}/{len(splits)}: GPVAE RMSE {gp['rmse']:.4f} NLL {gp['nll']:.3f} "
            f"(lengthscale {gp['lengthscale']:.3g}, noise {gp['noise']:.3g}, source {gp['source']}), "
            f"OK (CV: {recs['OK, CV-chosen model']['chosen']}) RMSE {recs['OK, CV-chosen model']['rmse']:.4f} "
            f"NLL {recs['OK, CV-chosen model']['nll']:.3f}")
    return rows


def pooled(recs: list[dict[str, float]], folds: bool) -> dict[str, float]:
    """Mean over splits (for CV folds: RMSE pooled over the folds of each seed is close enough)."""
    keys = [k for k in recs[0] if isinstance(recs[0][k], float)]
    return {k: float(np.mean([r[k] for r in recs])) for k in keys} | {
        k + "_sd": float(np.std([r[k] for r in recs])) for k in ("rmse", "nll")}


def print_table(title: str, rows: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    summary = {name: pooled(recs, False) for name, recs in rows.items()}
    chosen = [r["chosen"] for r in rows["OK, CV-chosen model"]]
    print(f"\n{title}")
    print(f"{'method':52s} {'RMSE':>17s} {'NLL':>17s} {'cov95':>6s} {'s/run':>6s}")
    for name, s in summary.items():
        print(f"{name:52s} {s['rmse']:8.4f} ± {s['rmse_sd']:.4f} {s['nll']:8.3f} ± {s['nll_sd']:.3f} "
              f"{s['cov95']:6.3f} {s['seconds']:6.2f}")
    print(f"  CV-chosen variogram per split: {', '.join(chosen)}")
    gp = next(iter(summary.values()))
    ok = summary["OK, CV-chosen model"]
    print(f"  GPVAE / OK (CV-chosen): RMSE ratio {gp['rmse'] / ok['rmse']:.4f} (goal <= 1.01), "
          f"NLL difference {gp['nll'] - ok['nll']:+.3f} (goal < 0); learnt lengthscale "
          f"{gp['lengthscale']:.3g}, noise variance {gp['noise']:.3g} (data units)")
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="synthetic,jura", help="synthetic, jura or both (comma-separated)")
    p.add_argument("--split", choices=("score", "tune"), default="score",
                   help="score: the scored sites; tune: synthetic field seeds 1000+, Jura 5-fold CV in the 259 sites")
    p.add_argument("--seeds", type=int, default=5, help="field seeds (synthetic) / model seeds (Jura)")
    p.add_argument("--options", default="{}", help="GPVAEImputer options as JSON (default: package defaults)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    require("benchmarks/kriging.py", {"pykrige": "PyKrige", "sklearn": "scikit-learn"})
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    options = json.loads(args.options)
    print(f"One scattered variable at new sites, {args.split} split; machine "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} "
          f"torch threads (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}); "
          f"torch {torch.__version__}; geogpvae {geogpvae.__version__}")
    out = {}
    for task in [t for t in args.task.split(",") if t]:
        if task == "synthetic":
            splits = synthetic_task(args.seeds, args.split)
            first = TUNE_SEED0 if args.split == "tune" else 0
            title = (f"synthetic Matérn-3/2 field (lengthscale {SYN['lengthscale']}, nugget {SYN['nugget']}), "
                     f"{SYN['n_train']} training / {SYN['n_new']} new sites, field seeds {first}-{first + args.seeds - 1}")
        elif task == "jura":
            splits = jura_task(args.seeds, args.split)
            title = ("Jura Cd alone (x, y in km), " + ("259 -> 100 validation sites" if args.split == "score"
                     else f"{FOLDS}-fold CV inside the 259 training sites") + f", model seeds 0-{args.seeds - 1}, mg/kg")
        else:
            raise SystemExit(f"unknown task {task!r}; choose synthetic or jura")
        print(f"{task}: {len(splits)} splits", flush=True)
        rows = run_task(splits, options, task == "synthetic", lambda s: print(s, flush=True))
        out[task] = {"title": title, "summary": print_table(title, rows), "rows": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": out}, fh, indent=1)


if __name__ == "__main__":
    main()
