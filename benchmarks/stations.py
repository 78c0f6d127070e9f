"""Space-time station network: GPVAE against interpolation in time and same-day regression.

Task: a synthetic network (``geogpvae.datasets.make_station_network``: 40 stations x 300 days,
one variable drawn from a space-time Matern-3/2 GP with lengthscales 2 days and 200 km, noise
0.1, 10 % of the values missing at random, about 1.5 outages of 5-30 days per station),
stored the CF way (dims (time, station), lat/lon on station). A share of the observed values
is hidden and scored: a random 10 %, plus one extra outage of 5-20 days at a third of the
stations. Each network seed is a separate task; the model seed equals the task seed, plus
``--model-seed-offset`` (to repeat a comparison with other model seeds on the same networks).

Methods, all given the same field with the scored values hidden:

* ``GPVAE (impute, defaults)``: ``geogpvae.impute(ds, vars=["v0"])``, as a new user would call it;
* ``GPVAE (stations as variables)``: the same network as a field on ``time`` alone with one
  variable per station (``geogpvae.impute(wide)``), so the encoder sees every station of a day
  and the GP links the days;
* ``interpolation in time``: each station on its own, linear in time between its observed
  days (constant beyond the ends); the standard deviation grows with the distance to the
  nearest observed day, fitted on observed values hidden from it (never the scored ones);
* ``same-day ridge regression``: each station regressed on the other stations of the same day
  (standardised, missing ones at their mean), ridge penalty by leave-one-out CV
  (scikit-learn ``RidgeCV``) on the days the station is observed; standard deviation from
  5-fold out-of-fold residuals.

Scores over the hidden values: RMSE and MAE (units of the variable, about unit variance),
mean Gaussian NLL (nats), coverage of central 95 % intervals, seconds per run. Per station (each
station's own hidden values, about 28 of them): the share of stations whose cov95 lies within
0.90-0.98 (issue 10, item 3) and the lowest station's cov95. With so few values a station's
coverage is noisy: the script prints, per network, the share of stations that intervals
covering exactly 0.95 would put within the band by chance (binomial), to read them against.

    python benchmarks/stations.py --threads 2                 # scored tasks: network seeds 0-2
    python benchmarks/stations.py --threads 2 --split tune    # tuning split: seeds 100-102
    python benchmarks/stations.py --methods gpvae,refs --seeds 1 --options '{"epochs": 20}'
    python benchmarks/stations.py --split tune --methods wide --model-seed-offset 1000

Needs the ``bench`` extra (scikit-learn).
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae
from geogpvae.datasets.stations import make_station_network

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from _requires import require

Z95 = 1.959964
SPLITS = {"score": 0, "tune": 100}  # first network seed of each split


def scores(mean: np.ndarray, std: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    err = mean - truth
    return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err))),
            "nll": float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * (err / std) ** 2)),
            "cov95": float(np.mean(np.abs(err) < Z95 * std))}


BAND = (0.90, 0.98)  # issue 10, item 3: every variable's cov95 within this band


def station_coverage(mean: np.ndarray, std: np.ndarray, truth: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """cov95 of each station's (column's) hidden values, shape (S,); NaN for a station with none."""
    inside = (np.abs(mean - truth) < Z95 * std) & hidden
    count = hidden.sum(0)
    return np.where(count > 0, inside.sum(0) / np.maximum(count, 1), np.nan)


def calibrated_band_share(counts: np.ndarray, p: float = 0.95, band: tuple[float, float] = BAND) -> float:
    """Expected share of stations whose cov95 falls in ``band`` for intervals that cover exactly
    ``p``: each station's count of covered values is binomial on its ``counts`` hidden values."""
    from scipy.stats import binom

    counts = counts[counts > 0]
    lo, hi = np.ceil(band[0] * counts - 1e-9), np.floor(band[1] * counts + 1e-9)
    return float(np.mean(binom.cdf(hi, counts, p) - binom.cdf(lo - 1, counts, p)))


def hide(observed: np.ndarray, rng: np.random.Generator, share: float = 0.1,
         block_share: float = 1 / 3, block_days: tuple[int, int] = (5, 20)) -> np.ndarray:
    """The observed (time, station) cells to hide and score: a random share plus outages."""
    hidden = observed & (rng.random(observed.shape) < share)
    n_days, n_stations = observed.shape
    for s in rng.choice(n_stations, round(block_share * n_stations), replace=False):
        length = int(rng.integers(block_days[0], block_days[1] + 1))
        start = int(rng.integers(0, n_days - length + 1))
        hidden[start : start + length, s] |= observed[start : start + length, s]
    return hidden


def task(seed: int, network: dict) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
    """(field with the scored values hidden, hidden mask (T, S), truth (T, S))."""
    ds, truth = make_station_network(seed=seed, return_truth=True, **network)
    observed = ds.v0.notnull().values
    hidden = hide(observed, np.random.default_rng(seed + 10_000))
    work = ds.copy(deep=True)
    work["v0"] = ds.v0.where(~xr.DataArray(hidden, dims=ds.v0.dims))
    return work, hidden, truth.v0.values


# ---------------------------------------------------------------------------- references
def interpolate_in_time(values: np.ndarray) -> np.ndarray:
    """Each column (station) linearly in time between its finite values; constant beyond."""
    out = np.empty_like(values)
    days = np.arange(values.shape[0])
    for s in range(values.shape[1]):
        ok = np.isfinite(values[:, s])
        out[:, s] = np.interp(days, days[ok], values[ok, s])
    return out


def gap_distance(observed: np.ndarray) -> np.ndarray:
    """Days from each cell to its station's nearest observed day (0 where observed)."""
    days = np.arange(observed.shape[0])
    out = np.empty(observed.shape)
    for s in range(observed.shape[1]):
        obs_days = days[observed[:, s]]
        pos = np.searchsorted(obs_days, days).clip(1, len(obs_days) - 1)
        out[:, s] = np.minimum(np.abs(days - obs_days[pos - 1]), np.abs(obs_days[pos] - days))
    return out


_BINS = np.array([0.5, 1.5, 2.5, 4.5, 8.5, 16.5, np.inf])


def interpolation_reference(values: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Interpolation in time, with a standard deviation by distance to the nearest observed day.

    The variance of each distance bin is the mean squared error of interpolating observed
    values hidden from it (a random 10 % of them, plus 10-day runs at every station), capped
    by the variance of the values; bins with fewer than 20 such values take the cap.
    """
    observed = np.isfinite(values)
    mean = interpolate_in_time(values)
    probe = hide(observed, rng, share=0.1, block_share=1.0, block_days=(10, 10))
    err = interpolate_in_time(np.where(probe, np.nan, values))[probe] - values[probe]
    dist = gap_distance(observed & ~probe)[probe]
    cap = float(np.nanvar(values))
    var_bin = np.full(len(_BINS) - 1, cap)
    which = np.digitize(dist, _BINS) - 1
    for b in range(len(var_bin)):
        if (which == b).sum() >= 20:
            var_bin[b] = min(cap, float(np.mean(err[which == b] ** 2)))
    var_bin = np.maximum.accumulate(var_bin)  # farther never more certain
    d = gap_distance(observed)
    return mean, np.sqrt(var_bin[(np.digitize(d, _BINS) - 1).clip(0, len(var_bin) - 1)])


def ridge_reference(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each station on the other stations of the same day (ridge, LOO-chosen penalty)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import cross_val_predict

    observed = np.isfinite(values)
    mu, sd = np.nanmean(values, 0), np.nanstd(values, 0)
    z = np.where(observed, (values - mu) / sd, 0.0)
    mean, std = np.empty_like(values), np.empty_like(values)
    alphas = np.logspace(-2, 4, 25)
    for s in range(values.shape[1]):
        feats = np.delete(z, s, axis=1)
        rows = observed[:, s]
        model = RidgeCV(alphas=alphas).fit(feats[rows], z[rows, s])
        oof = cross_val_predict(RidgeCV(alphas=alphas), feats[rows], z[rows, s], cv=5)
        mean[:, s] = mu[s] + sd[s] * model.predict(feats)
        std[:, s] = sd[s] * np.sqrt(np.mean((oof - z[rows, s]) ** 2))
    return mean, std


# ---------------------------------------------------------------------------- GPVAE
def gpvae_default(work: xr.Dataset, seed: int, options: dict) -> tuple[np.ndarray, np.ndarray]:
    out = geogpvae.impute(work, vars=["v0"], seed=seed, progress=False, **options)
    return out.v0.values, out.v0_std.values


def gpvae_wide(work: xr.Dataset, seed: int, options: dict) -> tuple[np.ndarray, np.ndarray]:
    """Stations as variables: one variable per station on the time axis."""
    names = [str(n) for n in work.station_name.values]
    wide = xr.Dataset({n: ("time", work.v0.values[:, s]) for s, n in enumerate(names)},
                      coords={"time": work.time})
    out = geogpvae.impute(wide, vars=names, seed=seed, progress=False, **options)
    return (np.column_stack([out[n].values for n in names]),
            np.column_stack([out[f"{n}_std"].values for n in names]))


REFERENCES = {
    "interpolation in time (per station)":
        lambda work, seed, _: interpolation_reference(work.v0.values, np.random.default_rng(seed + 20_000)),
    "same-day ridge regression on the other stations": lambda work, seed, _: ridge_reference(work.v0.values),
}
METHODS = {
    "gpvae": ("GPVAE (impute, defaults)", gpvae_default),
    "wide": ("GPVAE (stations as variables)", gpvae_wide),
}


def run(seeds: list[int], methods: list[str], network: dict, options: dict, model_offset: int = 0) -> list[dict]:
    rows: dict[str, list[dict]] = {}
    for seed in seeds:
        work, hidden, truth = task(seed, network)
        runs = {}
        for key in methods:
            calls = REFERENCES if key == "refs" else {METHODS[key][0]: METHODS[key][1]}
            for label, fn in calls.items():
                t = time.perf_counter()
                mean, std = fn(work, seed + model_offset, options)
                runs[label] = (mean, std, time.perf_counter() - t)
        for label, (mean, std, secs) in runs.items():
            rec = scores(mean[hidden], std[hidden], truth[hidden])
            per_station = station_coverage(mean, std, truth, hidden)
            rec["stations_in_band"] = float(np.nanmean((per_station >= BAND[0]) & (per_station <= BAND[1])))
            rec["station_cov95_min"] = float(np.nanmin(per_station))
            rec["seconds"] = secs
            rows.setdefault(label, []).append(rec)
        print(f"  network seed {seed}: {int(hidden.sum())} values scored; with intervals covering exactly 0.95, "
              f"{calibrated_band_share(hidden.sum(0)):.2f} of the stations would fall in cov95 {BAND[0]}-{BAND[1]} "
              "by chance alone", flush=True)
    return [summarise(name, r) for name, r in rows.items()]


def summarise(name: str, rows: list[dict]) -> dict:
    agg = {k: (float(np.mean([r[k] for r in rows])), float(np.std([r[k] for r in rows]))) for k in rows[0]}
    return {"method": name, "n": len(rows), **agg}


def fmt(v: tuple[float, float]) -> str:
    return f"{v[0]:.3f} ± {v[1]:.3f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3, help="number of networks (tasks)")
    p.add_argument("--first", type=int, default=0, help="the split's first network seed plus this")
    p.add_argument("--split", choices=sorted(SPLITS), default="score",
                   help="score: network seeds 0, 1, ...; tune: seeds 100, 101, ... (choose settings here)")
    p.add_argument("--methods", default="gpvae,fixed,wide,refs", help="comma list of gpvae, fixed, wide, refs")
    p.add_argument("--network", default="{}", help="make_station_network options as JSON")
    p.add_argument("--options", default="{}", help="extra engine options as JSON (GPVAE methods)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--model-seed-offset", type=int, default=0, help="added to each network seed to seed the models")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    require("benchmarks/stations.py", {"sklearn": "scikit-learn"})
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    seeds = [SPLITS[args.split] + args.first + i for i in range(args.seeds)]
    methods = [m for m in args.methods.split(",") if m]
    print(f"Station network ({args.split} split, network seeds {seeds}, model seed offset {args.model_seed_offset}); "
          f"machine {platform.machine()} {platform.processor() or ''}, {torch.get_num_threads()} threads; "
          f"geogpvae {geogpvae.__version__}, torch {torch.__version__}")
    print(reference_line(), flush=True)
    results = run(seeds, methods, json.loads(args.network), json.loads(args.options), args.model_seed_offset)
    print(f"\n{'method':50s} {'RMSE':>15s} {'MAE':>15s} {'NLL':>15s} {'cov95':>15s} {'s/run':>7s}")
    for r in results:
        print(f"{r['method']:50s} {fmt(r['rmse']):>15s} {fmt(r['mae']):>15s} {fmt(r['nll']):>15s} "
              f"{fmt(r['cov95']):>15s} {r['seconds'][0]:7.1f}")
    band_label = f"share in cov95 {BAND[0]}-{BAND[1]}"
    print(f"\n{'per station (its own hidden values)':50s} {band_label:>24s} {'lowest cov95':>15s}")
    for r in results:
        print(f"{r['method']:50s} {fmt(r['stations_in_band']):>24s} {fmt(r['station_cov95_min']):>15s}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "machine": platform.machine(), "threads": torch.get_num_threads(),
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
