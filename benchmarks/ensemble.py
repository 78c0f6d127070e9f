"""Do two default fits from different model seeds, combined, predict better than one? (diagnostic)

Each task is imputed with the package defaults once per member seed. The members' predictions
of the hidden values are then combined, value by value:

* ``mixture``: the mean of the member means, and the variance of the equal-weight mixture of
  the members' Gaussians (the mean of their variances plus the spread of their means);
* ``pooled``: the same mean, with the mean of the member variances (no spread term).

Both are scored beside ``one fit``, the average of the members' own scores (what a user gets
from one call today). Only tuning splits are offered, never the scored values:

* ``jura``: 5-fold cross-validation of Cd inside the 259 training sites (Ni and Zn seen
  everywhere), as ``tune_speed.py --task jura``;
* ``spe10``: the paper task (every second cell, half the values dropped) on a tuning mask;
* ``stations``: stations as variables on the tuning networks 100, 101, ... (as ``stations.py
  --split tune --methods wide``; the second member's seed is the first's plus 1000);
* ``blocks``: the synthetic outage fields 200, 201, ... (as ``tune_speed.py --task blocks``).

Scores per variable are averaged over variables (RMSE in units of each variable's observed
standard deviation for SPE10, as ``spe10.py``'s ``observed`` units), then over tasks.

    python benchmarks/ensemble.py --task jura --pairs 3 --threads 2
    python benchmarks/ensemble.py --task spe10 --mask-seed 1 --threads 2
    python benchmarks/ensemble.py --task stations --tasks 3 --threads 2
    python benchmarks/ensemble.py --task blocks --tasks 3 --threads 2

Each member is one full default call, so a K-member combination costs K calls.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line

Z95 = 1.959964

# A task: (input dataset, variable names, {name: (hidden mask, truth at the hidden values, scale)}).
Task = tuple[xr.Dataset, list[str], dict[str, tuple[np.ndarray, np.ndarray, float]]]


def jura_tasks(n: int) -> Iterator[Task]:
    from tune_speed import jura_folds

    for work, names, hidden in jura_folds(5):
        yield work, names, {k: (m, t, 1.0) for k, (m, t) in hidden.items()}


def block_tasks_(n: int, first: int = 0) -> Iterator[Task]:
    from tune_speed import block_tasks

    for i, (work, names, hidden) in enumerate(block_tasks(first + n)):
        if i >= first:
            yield work, names, {k: (m, t, 1.0) for k, (m, t) in hidden.items()}


def spe10_tasks(mask_seed: int) -> Iterator[Task]:
    from spe10 import load_task, observed_scale

    ds, names, truth, keep = load_task(False, mask_seed)
    scale = observed_scale(truth, keep)
    work = ds[["porosity"]].copy()
    for c, n in enumerate(names):
        work[n] = (("z", "y", "x"), np.where(keep[..., c], truth[..., c], np.nan))
    work = work[names]
    hidden = {}
    for c, n in enumerate(names):
        drop = ~keep[..., c]
        # the output's dims come back in the input's order (z, y, x), as the mask
        hidden[n] = (drop, truth[..., c][drop], float(scale[c]))
    yield work, names, hidden


def station_tasks(n: int, first: int = 0) -> Iterator[Task]:
    from stations import task

    for seed in range(100 + first, 100 + first + n):
        work, hidden, truth = task(seed, {})
        names = [str(s) for s in work.station_name.values]
        wide = xr.Dataset({s: ("time", work.v0.values[:, i]) for i, s in enumerate(names)},
                          coords={"time": work.time})
        yield wide, names, {s: (hidden[:, i], truth[hidden[:, i], i], 1.0) for i, s in enumerate(names)}


def member(work: xr.Dataset, names: list[str], seed: int, options: dict) -> tuple[xr.Dataset, float]:
    t = time.perf_counter()
    out = geogpvae.impute(work, vars=names, seed=seed, progress=False, **options)
    return out, time.perf_counter() - t


def scores(mean: np.ndarray, var: np.ndarray, truth: np.ndarray, scale: float) -> dict[str, float]:
    err, sd = (mean - truth) / scale, np.sqrt(var) / scale
    return {"rmse": float(np.sqrt(np.mean(err**2))),
            "nll": float(np.mean(0.5 * np.log(2 * np.pi * sd**2) + 0.5 * (err / sd) ** 2)),
            "cov95": float(np.mean(np.abs(err) < Z95 * sd))}


def combine(means: np.ndarray, variances: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Member predictions (K, n) combined: mixture moments and pooled variances."""
    mean = means.mean(0)
    pooled = variances.mean(0)
    return {"mixture": (mean, pooled + means.var(0)), "pooled": (mean, pooled)}


def run_task(task: Task, seeds: list[int], options: dict) -> dict[str, dict[str, float]]:
    work, names, hidden = task
    outs, secs = zip(*(member(work, names, s, options) for s in seeds))
    rows: dict[str, list[dict[str, float]]] = {}
    for name, (mask, truth, scale) in hidden.items():
        means = np.stack([o[name].values[mask] for o in outs])
        variances = np.stack([o[f"{name}_std"].values[mask] ** 2 for o in outs])
        single = [scores(m, v, truth, scale) for m, v in zip(means, variances)]
        rows.setdefault("one fit", []).append({k: float(np.mean([s[k] for s in single])) for k in single[0]})
        for label, (m, v) in combine(means, variances).items():
            rows.setdefault(label, []).append(scores(m, v, truth, scale))
    out = {label: {k: float(np.mean([r[k] for r in rs])) for k in rs[0]} for label, rs in rows.items()}
    out["one fit"]["seconds"] = float(np.mean(secs))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["jura", "spe10", "stations", "blocks"], required=True)
    p.add_argument("--tasks", type=int, default=3, help="networks (stations) or fields (blocks)")
    p.add_argument("--first", type=int, default=0, help="skip this many networks (stations) or fields (blocks)")
    p.add_argument("--pairs", type=int, default=1, help="member seed pairs (0, 1), (2, 3), ...")
    p.add_argument("--first-pair", type=int, default=0, help="Jura: start at pair (2 * this, 2 * this + 1)")
    p.add_argument("--members", type=int, default=2)
    p.add_argument("--mask-seed", type=int, default=1, help="SPE10 tuning mask (never 0, the scored one)")
    p.add_argument("--options", default="{}", help="extra impute options as JSON")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.task == "spe10" and args.mask_seed == 0:
        p.error("mask seed 0 is SPE10's scored mask; tune on masks 1-8")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(reference_line(), flush=True)
    options = json.loads(args.options)
    if args.task == "jura":
        options = {"neighbours": 10, **options}
    results = []
    for pair in range(args.first_pair, args.first_pair + args.pairs):
        tasks = {"jura": lambda: jura_tasks(5), "spe10": lambda: spe10_tasks(args.mask_seed),
                 "stations": lambda: station_tasks(args.tasks, args.first),
                 "blocks": lambda: block_tasks_(args.tasks, args.first)}[args.task]()
        for i, task in enumerate(tasks):
            base = pair * args.members
            seeds = ([100 + args.first + i + 1000 * k for k in range(args.members)] if args.task == "stations"
                     else list(range(base, base + args.members)))
            res = run_task(task, seeds, options)
            results.append(res)
            print(f"  task {i}, seeds {seeds}: " + "; ".join(
                f"{k} {v['rmse']:.4f} / {v['nll']:.4f} / {v['cov95']:.3f}" for k, v in res.items()), flush=True)
    print(f"\n{args.task}: {len(results)} fits of {args.members} members (RMSE / NLL / cov95)")
    summary = {}
    for label in results[0]:
        summary[label] = {k: float(np.mean([r[label][k] for r in results])) for k in results[0][label]}
        s = summary[label]
        print(f"  {label:10s} {s['rmse']:.4f} / {s['nll']:.4f} / {s['cov95']:.3f}")
    print(f"  one member's call: {summary['one fit']['seconds']:.1f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "machine": platform.machine(), "threads": torch.get_num_threads(),
                       "fits": results, "summary": summary}, fh, indent=1)


if __name__ == "__main__":
    main()
