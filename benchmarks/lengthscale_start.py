"""Where the latent lengthscales start, on the five whole-field tuning tasks (rules 12 and 13).

The latent lengthscales start at the median distance from a location to its H-th nearest
neighbour and learn slowly from there. On Jura Cd alone (the kriging task's tuning folds) a
start near the nearest neighbour's distance predicts new sites far better; on the smooth
synthetic field it is far worse. This script runs option sets side by side on the tasks where
every step takes the whole field, all tuning splits (no scored value is read):

* ``kjura``: Jura Cd alone with its x, y, 5-fold CV inside the 259 training sites, model seeds
  0-2 (``kriging.py --split tune``), with the ratio of the RMSE to the CV-chosen kriging's;
* ``ksyn``: the kriging task's synthetic Matérn fields 1000-1002;
* ``jura`` and ``matched``: Jura Ni, Zn and Cd, Cd hidden at the 100 validation sites (never
  scored) and at a fifth of the training sites, random or distance-matched folds, model seeds
  0-2 (``tune_speed.py``);
* ``wide``: stations as variables, networks 100-102 (``stations.py --split tune --methods wide``).

Each option set gives one fit per task and seed. With ``--emulate``, two option sets stand for
the two halves of a selection among four candidates (each fit runs its own beta selection on the
same check values from the same initial weights): per fit, the one whose best check score is
lower is kept, which is what a selection over both would keep.

    python benchmarks/lengthscale_start.py --threads 2 --tasks kjura,ksyn,jura,matched,wide \\
        '{}' '{"extra": {"lengthscale_rank": 1}}' --emulate           # rule 12
    python benchmarks/lengthscale_start.py --threads 2 '{"extra": {"lengthscale_spread": true}}'  # rule 13

Needs the ``bench`` extra (PyKrige, scikit-learn) and the Jura files (GEOGPVAE_DATA_DIR).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from _requires import require
from tune_speed import scores

TASKS = ("kjura", "ksyn", "jura", "matched", "wide")

Fit = Callable[[dict], tuple[dict[str, float], "geogpvae.GPVAEImputer"]]


def jura_fits(split: str) -> Iterator[tuple[str, Fit, float | None]]:
    from tune_speed import jura_folds

    for fold, (work, names, hidden) in enumerate(jura_folds(5, split=split)):
        mask, truth = hidden["Cd"]
        for seed in range(3):
            def fit(options, work=work, names=names, mask=mask, truth=truth, seed=seed):
                imputer = geogpvae.GPVAEImputer(seed=seed, progress=False, neighbours=10, **options)
                out = imputer.fit(work, names).impute(work)
                return scores(out.Cd.values[mask], out.Cd_std.values[mask], truth), imputer
            yield f"fold {fold} seed {seed}", fit, None


def kriging_fits(task: str) -> Iterator[tuple[str, Fit, float | None]]:
    from kriging import as_dataset, jura_task, kriging_rows, synthetic_task

    splits = synthetic_task(3, "tune") if task == "ksyn" else jura_task(3, "tune")
    for i, (xt, vt, xn, vn, seed) in enumerate(splits):
        kriged = kriging_rows(xt, vt, xn, vn)["OK, CV-chosen model"]["rmse"]

        def fit(options, xt=xt, vt=vt, xn=xn, vn=vn, seed=seed):
            imputer = geogpvae.GPVAEImputer(seed=seed, progress=False, coords=["x", "y"], **options)
            out = imputer.fit(as_dataset(xt, vt), "v").predict(as_dataset(xn))
            return scores(out.v.values, out.v_std.values, vn), imputer
        yield f"split {i}", fit, kriged


def wide_fits() -> Iterator[tuple[str, Fit, float | None]]:
    from stations import task

    for network in (100, 101, 102):
        work, hidden, truth = task(network, {})
        names = [str(n) for n in work.station_name.values]
        wide = xr.Dataset({n: ("time", work.v0.values[:, s]) for s, n in enumerate(names)},
                          coords={"time": work.time})

        def fit(options, wide=wide, names=names, hidden=hidden, truth=truth, seed=network):
            imputer = geogpvae.GPVAEImputer(seed=seed, progress=False, **options)
            out = imputer.fit(wide, names).impute(wide)
            mean = np.column_stack([out[n].values for n in names])
            std = np.column_stack([out[f"{n}_std"].values for n in names])
            return scores(mean[hidden], std[hidden], truth[hidden]), imputer
        yield f"network {network}", fit, None


def fits(task: str) -> Iterator[tuple[str, Fit, float | None]]:
    if task in ("jura", "matched"):
        return jura_fits("random" if task == "jura" else "matched")
    if task in ("kjura", "ksyn"):
        return kriging_fits(task)
    return wide_fits()


def run(task: str, option_sets: list[str], emulate: bool) -> None:
    rows = []
    for label, fit, kriged in fits(task):
        rec: dict = {"kriged": kriged}
        for text in option_sets:
            t = time.perf_counter()
            score, imputer = fit(json.loads(text))
            engine = imputer.engine_
            score["check"] = float(min(engine.kl_scores_.values())) if engine.kl_scores_ else float("nan")
            score["seconds"] = time.perf_counter() - t
            rec[text] = score
        if emulate:
            rec["emulated"] = min((rec[t] for t in option_sets), key=lambda s: s["check"])
        print(f"  {task} {label}: " + "; ".join(f"{k} RMSE {v['rmse']:.4f} NLL {v['nll']:.3f} check {v['check']:.3f}"
                                              for k, v in rec.items() if k != "kriged"), flush=True)
        rows.append(rec)
    print(f"{task}: {len(rows)} fits")
    for name in [*option_sets, *(["emulated"] if emulate else [])]:
        mean = {k: float(np.mean([r[name][k] for r in rows])) for k in ("rmse", "nll", "cov95", "seconds")}
        ratio = ""
        if rows[0]["kriged"] is not None:
            ratio = f", ratio to CV-chosen kriging {mean['rmse'] / np.mean([r['kriged'] for r in rows]):.4f}"
        print(f"  {name:50s} RMSE {mean['rmse']:.4f} NLL {mean['nll']:.4f} cov95 {mean['cov95']:.4f} "
              f"{mean['seconds']:.1f} s{ratio}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("options", nargs="*", default=["{}"], help="option sets as JSON")
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma list of {', '.join(TASKS)}")
    p.add_argument("--emulate", action="store_true",
                   help="also the selection among the option sets by their best check score (two sets)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    require("benchmarks/lengthscale_start.py", {"pykrige": "PyKrige", "sklearn": "scikit-learn"})
    torch.set_num_threads(args.threads)
    print(f"latent lengthscale starts, tuning splits; {platform.machine()}, {torch.get_num_threads()} threads, "
          f"geogpvae {geogpvae.__version__}, torch {torch.__version__}")
    print(reference_line(), flush=True)
    for task in [t for t in args.tasks.split(",") if t]:
        if task not in TASKS:
            raise SystemExit(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
        run(task, args.options, args.emulate)


if __name__ == "__main__":
    main()
