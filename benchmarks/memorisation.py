"""Does calibration see the errors of values the model never trained on? A probe of never-trained values.

Calibration hides observed values and predicts them from the rest, but the model was trained on
those values. Where it can recall them (many variables per location, whole-field steps, many
passes), their errors are smaller than those of values it never saw, and the calibrated
intervals come out too narrow where it matters. This benchmark measures it on tuning fields
only: a random ``--share`` of the observed values (the *probe*) is removed from the input
altogether, so the model never trains on them; the field is imputed with the package
defaults, and the probe's calibrated mean squared z-score says how much wider the intervals of
never-trained values should be (1 when calibration sees the truth). Coverage and NLL of the
benchmark's own hidden values are printed as given and as if the calibrated variances had been
scaled by that ratio (offline; the model is unchanged).

Tasks: ``stations`` (stations as variables: ``benchmarks/stations.py``'s tuning networks
100-102, one variable per station on ``time``; scored on its hidden values) and ``jura``
(Jura, Cd hidden at the validation sites as in the scored task, never read; the probe is drawn
from the training sites' values of Ni, Zn and Cd; only the probe is scored: its ratio and
coverage, pooled over the three variables).

    python benchmarks/memorisation.py --threads 2
    python benchmarks/memorisation.py --task stations --options '{"epochs": 300}'
    python benchmarks/memorisation.py --task jura --seeds 3
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stations as station_bench

Z95 = 1.959964


def scores(err: np.ndarray, std: np.ndarray) -> tuple[float, float, float]:
    """RMSE, mean Gaussian NLL (nats) and 95 % coverage."""
    nll = np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * (err / std) ** 2)
    return float(np.sqrt(np.mean(err**2))), float(nll), float(np.mean(np.abs(err) < Z95 * std))


def station_case(seed: int) -> tuple[xr.Dataset, list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(wide field, variables, scored mask, truth, probe-eligible mask) of one tuning network."""
    work, hidden, truth = station_bench.task(seed, {})
    names = [str(n) for n in work.station_name.values]
    wide = xr.Dataset({n: ("time", work.v0.values[:, s]) for s, n in enumerate(names)}, coords={"time": work.time})
    return wide, names, hidden, truth, np.isfinite(work.v0.values)


def jura_case() -> tuple[xr.Dataset, list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Jura as in the scored task (Cd hidden at the validation sites); only training sites probed."""
    from geogpvae.datasets import load_jura

    ds = load_jura()
    names = ["Ni", "Zn", "Cd"]
    val = ds.split.values == "validation"
    ds["Cd"] = ds.Cd.where(~xr.DataArray(val, dims=ds.Cd.dims))
    values = np.column_stack([ds[n].values for n in names])
    eligible = np.isfinite(values) & ~val[:, None]
    return ds, names, np.zeros_like(eligible), values, eligible


def run_case(ds, names, hidden, truth, eligible, *, share: float, seed: int, options: dict) -> dict:
    probe = eligible & (np.random.default_rng([seed, 555]).random(eligible.shape) < share)
    work = ds.copy(deep=True)
    for j, n in enumerate(names):
        work[n] = ds[n].where(~xr.DataArray(probe[:, j], dims=ds[n].dims))
    out = geogpvae.impute(work, vars=names, seed=seed, progress=False, **options)
    mean = np.column_stack([out[n].values for n in names])
    std = np.column_stack([out[f"{n}_std"].values for n in names])
    z2 = ((mean - truth)[probe] / std[probe]) ** 2
    rec = {"ratio": float(z2.mean()), "se": float(z2.std() / np.sqrt(z2.size)), "probe": int(probe.sum())}
    rec["probe_scores"] = scores((mean - truth)[probe], std[probe])
    if hidden.any():
        err, s = (mean - truth)[hidden], std[hidden]
        rec["as_given"] = scores(err, s)
        rec["scaled"] = scores(err, s * np.sqrt(max(1.0, rec["ratio"])))
    return rec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["stations", "jura"], default="stations")
    p.add_argument("--seeds", type=int, default=3, help="networks (stations) or model seeds (jura)")
    p.add_argument("--share", type=float, default=0.05, help="share of the observed values probed")
    p.add_argument("--options", default="{}", help="impute options as JSON")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    options = json.loads(args.options)
    print(f"memorisation probe, task {args.task}, share {args.share}, options {options}; "
          f"{platform.machine()} {platform.processor()}, {torch.get_num_threads()} threads, "
          f"geogpvae {geogpvae.__version__}, torch {torch.__version__}")
    rows = []
    for i in range(args.seeds):
        seed = 100 + i if args.task == "stations" else i
        case = station_case(seed) if args.task == "stations" else jura_case()
        rec = run_case(*case, share=args.share, seed=seed, options=options)
        rows.append(rec)
        line = f"  seed {seed}: probe {rec['probe']} values, calibrated mean z2 {rec['ratio']:.2f} ± {rec['se']:.2f}"
        line += f"; probe cov95 {rec['probe_scores'][2]:.3f}"
        if "as_given" in rec:
            line += "; hidden values {:.3f} / {:.3f} / {:.3f}".format(*rec["as_given"])
            line += ", scaled {:.3f} / {:.3f} / {:.3f}".format(*rec["scaled"])
        print(line, flush=True)
    print(f"mean calibrated z2 of never-trained values: {np.mean([r['ratio'] for r in rows]):.2f}")
    if "as_given" in rows[0]:
        given, scaled = (np.mean([r[k] for r in rows], 0) for k in ("as_given", "scaled"))
        print("hidden values, RMSE / NLL / cov95: as given {:.3f} / {:.3f} / {:.3f}; ".format(*given)
              + "variances scaled by the ratio {:.3f} / {:.3f} / {:.3f}".format(*scaled))


if __name__ == "__main__":
    main()
