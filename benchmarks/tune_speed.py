"""Tuning split for the training budget (stopping rule, batch size, step caps): never the scored values.

Jura: cross-validation inside the 259 training sites. Cd stays hidden at the 100 validation sites
(as in the scored task, so they are never looked at), and in each of ``--folds`` folds a further
fifth of the training sites has its Cd hidden too; Cd is scored at those sites only (mg/kg).
Synthetic: a 3-variable Gaussian-process field on a 48 x 48 grid (the ``geogpvae demo`` field
with a different seed), half of the values hidden, scored on the hidden values. Blocks: the same
kind of field with outages (rectangular gaps per variable plus a few random ones).

Prints RMSE, NLL, 95 % coverage, seconds per fit and the optimiser steps taken, mean over folds and
seeds, for each option set given as JSON.

    python benchmarks/tune_speed.py --threads 2 '{}' '{"epochs": 2000, "batch_size": 256}'
    python benchmarks/tune_speed.py --task synthetic '{}'
    python benchmarks/tune_speed.py --split matched '{}'   # Jura folds shaped like the validation sites
    python benchmarks/tune_speed.py --task blocks --raw '{}'  # outages; coverage before calibration too
    python benchmarks/tune_speed.py --references    # kriging, KNN and the mean on the same folds
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import time

import numpy as np
import torch
import xarray as xr

import geogpvae
from geogpvae.datasets import load_jura

Z95 = 1.959964


def scores(mean: np.ndarray, std: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    err = mean - truth
    return {
        "rmse": float(np.sqrt(np.mean(err**2))),
        "nll": float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * (err / std) ** 2)),
        "cov95": float(np.mean(np.abs(err) < Z95 * std)),
    }


def jura_folds(n_folds: int, split_seed: int = 1234, split: str = "random"):
    """(input dataset, scored-site mask, truth) for each fold of the training sites.

    ``split="random"``: the training sites in ``n_folds`` random folds. ``split="matched"``:
    each fold is a fifth of the training sites chosen (a different draw per fold) so that their
    distances to the nearest other training site follow the validation sites' distances to the
    nearest training site (locations only; no validation value is read), as the validation
    sites lie between the sampled sites rather than next to them.
    """
    from geogpvae.engine.holdout import matched_entries

    ds = load_jura()
    val = ds.split.values == "validation"
    train_sites = np.flatnonzero(~val)
    if split == "matched":
        xy = np.column_stack([ds.x.values, ds.y.values])
        folds = [np.flatnonzero(matched_entries(xy, ~val[:, None], 0.2, seed=split_seed + i)[:, 0])
                 for i in range(n_folds)]
    else:
        rng = np.random.default_rng(split_seed)
        folds = np.array_split(rng.permutation(train_sites), n_folds)
    for fold in folds:
        scored = np.zeros(len(val), dtype=bool)
        scored[fold] = True
        work = ds[["Ni", "Zn", "Cd"]].copy(deep=True)
        work["Cd"] = work.Cd.where(~xr.DataArray(val | scored, dims="site"))
        yield work, ["Ni", "Zn", "Cd"], {"Cd": (scored, ds.Cd.values[scored])}


def synthetic_tasks(n_tasks: int):
    from geogpvae.datasets import make_gaussian_field

    for i in range(n_tasks):
        ds, truth = make_gaussian_field((48, 48), missing=0.5, seed=100 + i, return_truth=True)
        names = [str(v) for v in ds.data_vars]
        hidden = {}
        for name in names:
            h = (ds[name].isnull() & truth[name].notnull()).values
            hidden[name] = (h, truth[name].values[h])
        yield ds, names, hidden


def block_tasks(n_tasks: int):
    """Synthetic fields with outages: 10 % of values dropped at random plus, per variable, four
    10 x 10 blocks of the 48 x 48 grid (gaps far from the data, as under clouds or a broken
    sensor); scored on every hidden value."""
    from geogpvae.datasets import make_gaussian_field

    for i in range(n_tasks):
        full, truth = make_gaussian_field((48, 48), missing=0.0, seed=200 + i, return_truth=True)
        rng = np.random.default_rng(200 + i)
        ds, hidden = full.copy(deep=True), {}
        for name in [str(v) for v in full.data_vars]:
            gap = rng.random((48, 48)) < 0.1
            for _ in range(4):
                r, c = rng.integers(0, 38, 2)
                gap[r:r + 10, c:c + 10] = True
            ds[name] = full[name].where(~gap)
            hidden[name] = (gap, truth[name].values[gap])
        yield ds, list(hidden), hidden


def raw_coverage(engine, out, names, hidden) -> dict[str, float]:
    """Mean over variables of the 95 % coverage before calibration, of the variance factors
    calibration chose (locations with, and without, own values) and of the factor the scored
    values needed (their mean squared standardised error before calibration, ``factor_needed``);
    empty when the engine's rows cannot be matched to the output's cells (C order of the
    field's array)."""
    again, raw = engine.predict(), engine.predict(calibrated=False)
    cov, f_own, f_none, need = [], [], [], []
    for name, (mask, truth) in hidden.items():
        j, flat = names.index(name), np.asarray(mask).ravel()
        if again.mean.shape[0] != flat.size or not np.allclose(again.mean[flat, j], out[name].values[mask], rtol=1e-6):
            return {}
        cov.append(np.mean(np.abs(raw.mean[flat, j] - truth) < Z95 * raw.std[flat, j]))
        need.append(np.mean(((raw.mean[flat, j] - truth) / raw.std[flat, j]) ** 2))
        factors = np.atleast_2d(engine.calibration_)[:, j]
        f_own.append(factors[0])
        f_none.append(factors[-1])
    return {"raw_cov95": float(np.mean(cov)), "factor_own": float(np.mean(f_own)), "factor_none": float(np.mean(f_none)),
            "factor_needed": float(np.mean(need))}


def run(task: str, n_tasks: int, seeds: range, options: dict, trace: bool = False,
        split: str = "random", raw: bool = False) -> dict[str, float]:
    rows = []
    tasks = {"jura": lambda: jura_folds(n_tasks, split=split), "synthetic": lambda: synthetic_tasks(n_tasks),
             "blocks": lambda: block_tasks(n_tasks)}[task]()
    extra = {"neighbours": 10} if task == "jura" else {}
    for work, names, hidden in tasks:
        for seed in seeds:
            t = time.perf_counter()
            imputer = geogpvae.GPVAEImputer(seed=seed, progress=False, **{**extra, **options})
            out = imputer.fit(work, names).impute(work)
            secs = time.perf_counter() - t
            per_var = []
            for name, (mask, truth) in hidden.items():
                per_var.append(scores(out[name].values[mask], out[f"{name}_std"].values[mask], truth))
            rec = {k: float(np.mean([p[k] for p in per_var])) for k in per_var[0]}
            rec["seconds"] = secs
            ts = imputer.engine_.train_state
            rec["steps"] = float(ts.steps)
            rec["best_step"] = float(ts.monitor.get("best_step", ts.steps))
            rec["kl_factor"] = float(imputer.engine_.kl_factor_ or np.nan)
            if raw:
                rec.update(raw_coverage(imputer.engine_, out, names, hidden))
            if trace:
                print("   trace", [(s, round(v, 3)) for s, v in zip(ts.monitor.get("steps", []), ts.monitor.get("scores", []))][::5],
                      {k: round(v, 3) for k, v in rec.items()}, flush=True)
            rows.append(rec)
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]} | {
        "rmse_sd": float(np.std([r["rmse"] for r in rows]))
    }


def jura_references(n_folds: int, split: str) -> dict[str, dict[str, float]]:
    """The Jura benchmark's references (kriging, KNN, the mean) on the same folds, scored the same
    way (mean over folds; KNNImputer gives no uncertainty, so NLL and coverage are NaN)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from jura import imputer_references, kriging_references

    ds = load_jura()
    rows: dict[str, list[dict[str, float]]] = {}
    for work, _, hidden in jura_folds(n_folds, split=split):
        scored, truth = hidden["Cd"]
        hide = work.Cd.isnull().values  # validation sites and this fold
        pick = scored[hide]  # the fold among the hidden sites
        obs = ds.Cd.values[~hide]
        refs = {"mean of the observed Cd": (np.full(hide.sum(), obs.mean()), np.full(hide.sum(), obs.std()), 0.0)}
        refs.update(kriging_references(ds, hide))
        refs.update(imputer_references(ds, hide, 0))
        for name, (m, s, _) in refs.items():
            rec = scores(np.asarray(m)[pick], np.ones(pick.sum()) if s is None else np.asarray(s)[pick], truth)
            if s is None:  # a point prediction: no NLL, no interval
                rec["nll"] = rec["cov95"] = float("nan")
            rows.setdefault(name, []).append(rec)
    return {name: {k: float(np.mean([r[k] for r in rs])) for k in rs[0]} for name, rs in rows.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("options", nargs="*", help="option sets as JSON (default '{}', none with --references)")
    p.add_argument("--task", choices=["jura", "synthetic", "blocks"], default="jura")
    p.add_argument("--folds", type=int, default=5, help="folds (Jura) or fields (synthetic)")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--first-seed", type=int, default=0, help="model seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--trace", action="store_true", help="print the stopping rule's scores")
    p.add_argument("--raw", action="store_true", help="also the coverage before calibration and the factors")
    p.add_argument("--split", choices=["random", "matched"], default="random",
                   help="Jura folds: random, or distance-matched to the validation sites")
    p.add_argument("--references", action="store_true",
                   help="Jura: also score kriging, KNNImputer and the mean on the same folds")
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
    # the engine is imported looks like torch's default to it
    torch.set_num_threads(args.threads)
    print(f"tuning split {args.task} ({args.split}): {args.folds} folds x {args.seeds} seeds from {args.first_seed}; "
          f"{platform.machine()}, {torch.get_num_threads()} threads, geogpvae {geogpvae.__version__}", flush=True)
    for text in args.options or ([] if args.references else ["{}"]):
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        r = run(args.task, args.folds, seeds, json.loads(text), args.trace, args.split, args.raw)
        print(f"{text:60s} RMSE {r['rmse']:.3f} (sd {r['rmse_sd']:.3f}) NLL {r['nll']:.3f} "
              f"cov95 {r['cov95']:.3f} {r['seconds']:.1f} s {r['steps']:.0f} steps (best {r['best_step']:.0f}) "
              f"beta x{r['kl_factor']:.2f}", flush=True)
        if "raw_cov95" in r:
            print(f"{'':60s} raw cov95 {r['raw_cov95']:.3f}, variance factors {r['factor_own']:.2f} (own values) "
                  f"{r['factor_none']:.2f} (none); needed by the scored values {r['factor_needed']:.2f}", flush=True)
    if args.references and args.task == "jura":
        for name, r in jura_references(args.folds, args.split).items():
            print(f"{name:60s} RMSE {r['rmse']:.3f} NLL {r['nll']:.3f} cov95 {r['cov95']:.3f}", flush=True)


if __name__ == "__main__":
    main()
