"""SPE10 imputation benchmark (paper appendix C.4), with the references a practitioner would try.

Protocol: every second cell on each axis of SPE10 model 2 (43 x 110 x 30 = 141,900 cells),
channels porosity, log kx, log ky, log kz; every value dropped independently with probability
0.5 (seeded); every dropped value scored. ``--honest`` uses porosity, log kx, log kz instead
(kx == ky in every SPE10 cell, so the twin channel gives ky away).

Scores: RMSE and Gaussian NLL per channel and overall,
* in standardised units of the observed values (each channel divided by the standard
  deviation of its observed values), and
* in the units of the reference implementation (each channel normalised by the mean and
  standard deviation of the masked array with missing entries set to zero), so the numbers
  stand beside the paper's table.

References (no uncertainty unless stated): the mean; a linear regression from the other
observed channels of the same cell; the average of the nearest observed cells of the channel;
their combination (regression where another channel is observed, else the neighbour average);
IterativeImputer (BayesianRidge) on coordinates and channels; gradient boosting per channel
(HistGradientBoosting) on the cell's other channels, 3x3x3 and 5x5x5 window means of the
observed values of every channel, and the coordinates.

    python benchmarks/spe10.py --epochs 30                # SPA-H20, package defaults
    python benchmarks/spe10.py --engine hpa --epochs 20
    python benchmarks/spe10.py --honest --epochs 30
    python benchmarks/spe10.py --references-only

Needs the SPE10 files (GEOGPVAE_DATA_DIR) and the ``bench`` extra (scikit-learn).
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

import geogpvae
from geogpvae.datasets import load_spe10

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from _requires import require

CHANNELS = {"full": ["porosity", "log_kx", "log_ky", "log_kz"], "honest": ["porosity", "log_kx", "log_kz"]}


# ---------------------------------------------------------------------------- data
def load_task(honest: bool, seed: int, downsample: int = 2):
    """The downsampled field, the channel cube ((43, 110, 30, C) at the default 2) and the keep-mask."""
    ds = load_spe10(downsample=downsample)
    cube = {
        "porosity": ds.porosity.values,
        "log_kx": np.log(ds.kx.values),
        "log_ky": np.log(ds.ky.values),
        "log_kz": np.log(ds.kz.values),
    }
    names = CHANNELS["honest" if honest else "full"]
    truth = np.stack([cube[n] for n in names], axis=-1)
    rng = np.random.default_rng(seed)
    keep = rng.random(truth.shape) >= 0.5
    return ds, names, truth, keep


def paper_scale(truth: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Per-channel sd of the masked array with missing entries set to zero (reference units)."""
    masked = np.where(keep, truth, 0.0).reshape(-1, truth.shape[-1])
    return masked.std(axis=0)


def observed_scale(truth: np.ndarray, keep: np.ndarray) -> np.ndarray:
    flat, k = truth.reshape(-1, truth.shape[-1]), keep.reshape(-1, truth.shape[-1])
    return np.array([flat[k[:, c], c].std() for c in range(flat.shape[1])])


def score(name, mean, std, truth, keep, scales, seconds=None, extra=None):
    """RMSE / NLL per channel and overall in both unit systems."""
    drop = ~keep
    out = {"method": name}
    for label, sc in scales.items():
        errs, nlls = [], []
        per = {}
        for c in range(truth.shape[-1]):
            e = (mean[..., c] - truth[..., c])[drop[..., c]] / sc[c]
            errs.append(e)
            rec = {"rmse": float(np.sqrt(np.mean(e**2)))}
            if std is not None:
                s = std[..., c][drop[..., c]] / sc[c]
                nll = 0.5 * np.log(2 * np.pi * s**2) + 0.5 * (e / s) ** 2
                nlls.append(nll)
                rec["nll"] = float(np.mean(nll))
                rec["cov95"] = float(np.mean(np.abs(e) < 1.959964 * s))
            per[c] = rec
        allerr = np.concatenate(errs)
        out[label] = {"rmse": float(np.sqrt(np.mean(allerr**2))), "per_channel": per}
        if nlls:
            out[label]["nll"] = float(np.mean(np.concatenate(nlls)))
            out[label]["cov95"] = float(np.mean([per[c]["cov95"] for c in per]))
    if seconds is not None:
        out["seconds"] = seconds
    if extra:
        out.update(extra)
    return out


# ---------------------------------------------------------------------------- references
def window_means(values: np.ndarray, keep: np.ndarray, size: int) -> np.ndarray:
    """Mean of the observed values of each channel in a size^3 window around every cell."""
    from scipy.ndimage import uniform_filter

    v = np.where(keep, values, 0.0)
    out = np.empty_like(v)
    for c in range(v.shape[-1]):
        s = uniform_filter(v[..., c], size=size, mode="constant")
        n = uniform_filter(keep[..., c].astype(float), size=size, mode="constant")
        out[..., c] = np.where(n > 1e-9, s / np.maximum(n, 1e-9), np.nan)
    return out


def ref_regression(values, keep):
    """Least squares from the other observed channels of the same cell, per pattern."""
    flat_v, flat_k = values.reshape(-1, values.shape[-1]), keep.reshape(-1, values.shape[-1])
    pred = np.full(flat_v.shape, np.nan)
    n_ch = flat_v.shape[1]
    for c in range(n_ch):
        others = [o for o in range(n_ch) if o != c]
        patterns = flat_k[:, others]
        for pat in np.unique(patterns, axis=0):
            rows = np.all(patterns == pat, axis=1)
            feats = [others[i] for i in range(len(others)) if pat[i]]
            train = rows & flat_k[:, c]
            target = rows & ~flat_k[:, c]
            if not target.any():
                continue
            a = np.column_stack([np.ones(train.sum())] + [flat_v[train, f] for f in feats])
            coef, *_ = np.linalg.lstsq(a, flat_v[train, c], rcond=None)
            b = np.column_stack([np.ones(target.sum())] + [flat_v[target, f] for f in feats])
            pred[target, c] = b @ coef
    return pred.reshape(values.shape)


def ref_nearest(values, keep, coords, k=8):
    """Average of the k nearest cells where the channel is observed."""
    from scipy.spatial import cKDTree

    flat_v, flat_k = values.reshape(-1, values.shape[-1]), keep.reshape(-1, values.shape[-1])
    pred = np.full(flat_v.shape, np.nan)
    for c in range(flat_v.shape[1]):
        tree = cKDTree(coords[flat_k[:, c]])
        _, idx = tree.query(coords[~flat_k[:, c]], k=k, workers=-1)
        pred[~flat_k[:, c], c] = flat_v[flat_k[:, c], c][idx].mean(1)
    return pred.reshape(values.shape)


def references(values, keep, coords, seed):
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer
    from sklearn.linear_model import BayesianRidge

    out = {}
    n_ch = values.shape[-1]
    flat_k = keep.reshape(-1, n_ch)
    mean = np.array([values[..., c][keep[..., c]].mean() for c in range(n_ch)])
    out["mean"] = (np.broadcast_to(mean, values.shape).copy(), 0.0)
    t = time.perf_counter()
    reg = ref_regression(values, keep)
    t_reg = time.perf_counter() - t
    reg_filled = np.where(np.isnan(reg), mean, reg)
    out["regression, same cell"] = (reg_filled, t_reg)
    t = time.perf_counter()
    near = ref_nearest(values, keep, coords)
    out["nearest observed (k=8) average"] = (near, time.perf_counter() - t)
    all_dropped = ~keep.any(-1, keepdims=True)
    out["regression + nearest average"] = (np.where(all_dropped | np.isnan(reg), near, reg), t_reg)
    t = time.perf_counter()
    cols = np.column_stack([coords, np.where(flat_k, values.reshape(-1, n_ch), np.nan)])
    imp = IterativeImputer(estimator=BayesianRidge(), max_iter=10, random_state=seed).fit_transform(cols)
    out["IterativeImputer (BayesianRidge)"] = (imp[:, coords.shape[1]:].reshape(values.shape), time.perf_counter() - t)
    t = time.perf_counter()
    w3, w5 = window_means(values, keep, 3), window_means(values, keep, 5)
    own = np.where(keep, values, np.nan).reshape(-1, n_ch)
    gb = np.empty(values.shape).reshape(-1, n_ch)
    for c in range(n_ch):
        others = [o for o in range(n_ch) if o != c]
        feats = np.column_stack([own[:, others], w3.reshape(-1, n_ch), w5.reshape(-1, n_ch), coords])
        model = HistGradientBoostingRegressor(max_iter=300, random_state=seed)
        model.fit(feats[flat_k[:, c]], values.reshape(-1, n_ch)[flat_k[:, c], c])
        gb[:, c] = model.predict(feats)
    out["gradient boosting (cell + windows + coords)"] = (gb.reshape(values.shape), time.perf_counter() - t)
    return out


# ---------------------------------------------------------------------------- GPVAE
def run_gpvae(ds, names, truth, keep, args):
    """Impute through the public xarray API and return mean/std cubes (modelled units)."""
    work = ds[["porosity"]].copy()
    for c, n in enumerate(names):
        work[n] = (("z", "y", "x"), np.where(keep[..., c], truth[..., c], np.nan))
    work = work[names]
    options = dict(engine=args.engine, neighbours=args.neighbours, epochs=args.epochs, seed=args.seed,
                   device=args.device, progress=args.progress)
    options.update(json.loads(args.options))
    if args.coord_scale:
        # axes not named stay in metres, as when the numbers in docs/benchmarks.md were taken
        options["coord_scale"] = {"z": 1.0, "y": 1.0, "x": 1.0, **json.loads(args.coord_scale)}
    t = time.perf_counter()
    imputer = geogpvae.GPVAEImputer(**options).fit(work, vars=names)
    fit_s = time.perf_counter() - t
    out = imputer.impute(work)
    total = time.perf_counter() - t
    mean = np.stack([out[n].transpose("z", "y", "x").values for n in names], -1)
    std = np.stack([out[f"{n}_std"].transpose("z", "y", "x").values for n in names], -1)
    raw = _raw_coverage(imputer.engine_, mean, names, truth, keep)
    hist = imputer.history
    epochs = len(hist["epoch"])
    per_epoch = hist["elapsed"][-1] / max(epochs, 1)
    return mean, std, {"fit_seconds": fit_s, "total_seconds": total, "epochs": epochs, "s_per_epoch": per_epoch,
                       "config": imputer.engine_.config.to_dict(), "uncalibrated": raw,
                       "kl_factor": imputer.engine_.kl_factor_, "kl_scores": imputer.engine_.kl_scores_}


def _raw_coverage(engine, mean, names, truth, keep):
    """Coverage of the dropped values before calibration, and the variance factors learnt.

    The engine predicts its training locations again with ``calibrated=False``; the locations
    are the cells in C order (checked: the calibrated prediction reproduces the imputed values).
    """
    again = engine.predict()
    shape = truth.shape
    if not np.allclose(again.mean.reshape(shape)[~keep], mean[~keep], rtol=1e-5, atol=1e-6):
        return {"error": "engine locations are not the cells in C order"}
    raw = engine.predict(calibrated=False)
    out = {"factors (with own values, without)": np.atleast_2d(engine.calibration_).tolist()}
    for c, name in enumerate(names):
        drop = ~keep[..., c]
        e = (raw.mean.reshape(shape)[..., c] - truth[..., c])[drop]
        out[name] = round(float(np.mean(np.abs(e) < 1.959964 * raw.std.reshape(shape)[..., c][drop])), 3)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", default="spa", choices=["spa", "hpa"])
    p.add_argument("--neighbours", type=int, default=20)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0, help="seed of the model")
    p.add_argument("--mask-seed", type=int, default=0, help="seed of the dropped values")
    p.add_argument("--device", default="auto")
    p.add_argument("--downsample", type=int, default=2, help="every k-th cell per axis (2: the paper task; 1: full)")
    p.add_argument("--honest", action="store_true", help="channels porosity, log kx, log kz")
    p.add_argument("--options", default="{}", help="extra engine options as JSON")
    p.add_argument("--coord-scale", default=None, help='per-axis scaling of the metres as JSON, e.g. {"z": 5} (axes not named: metres)')
    p.add_argument("--references-only", action="store_true")
    p.add_argument("--no-references", action="store_true")
    p.add_argument("--progress", default="log")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    if not args.no_references:
        require("benchmarks/spe10.py", {"sklearn": "scikit-learn"},
                hint=" (or pass --no-references to skip the reference methods)")

    ds, names, truth, keep = load_task(args.honest, args.mask_seed, args.downsample)
    coords = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in truth.shape[:3]], indexing="ij"), -1).reshape(-1, 3)
    scales = {"standardised": observed_scale(truth, keep), "paper units": paper_scale(truth, keep)}
    dev = "cuda: " + torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"SPE10 (every {args.downsample}. cell per axis) {truth.shape[:3]} = {np.prod(truth.shape[:3])} cells, channels {names}, "
          f"{(~keep).sum()} values dropped ({(~keep.any(-1)).sum()} cells fully dropped)")
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, {dev}; "
          f"geogpvae {geogpvae.__version__}, torch {torch.__version__}")
    print(reference_line(), flush=True)
    results = []
    if not args.references_only:
        mean, std, info = run_gpvae(ds, names, truth, keep, args)
        info["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        results.append(score(f"GPVAE-{args.engine.upper()}-H{args.neighbours}", mean, std, truth, keep, scales,
                             seconds=info["total_seconds"], extra=info))
    if not args.no_references:
        for name, (pred, secs) in references(truth, keep, coords, args.seed).items():
            results.append(score(name, pred, None, truth, keep, scales, seconds=secs))
    print(f"\n{'method':46s} | {'paper units':^22s} | {'standardised':^22s} | per channel RMSE (paper units)")
    print(f"{'':46s} | {'RMSE':>8s} {'NLL':>6s} {'cov95':>6s} | {'RMSE':>8s} {'NLL':>6s} {'cov95':>6s} |")
    for r in results:
        pu, st = r["paper units"], r["standardised"]
        per = " ".join(f"{names[c]} {pu['per_channel'][c]['rmse']:.3f}" for c in pu["per_channel"])
        nll = lambda d: f"{d['nll']:6.3f} {d['cov95']:6.3f}" if "nll" in d else f"{'-':>6s} {'-':>6s}"
        print(f"{r['method']:46s} | {pu['rmse']:8.3f} {nll(pu)} | {st['rmse']:8.3f} {nll(st)} | {per}")
    for r in results:
        if "epochs" in r:
            print(f"\n{r['method']}: 95 % coverage per channel before calibration {r['uncalibrated']}")
            after = {names[c]: round(d["cov95"], 3) for c, d in r["paper units"]["per_channel"].items()}
            print(f"{r['method']}: 95 % coverage per channel after calibration {after}")
            print(f"\n{r['method']}: {r['epochs']} epochs, {r['s_per_epoch']:.2f} s/epoch, fit {r['fit_seconds']:.0f} s, "
                  f"total {r['total_seconds']:.0f} s, peak RSS {r['peak_rss_mib']:.0f} MiB")
            if r.get("kl_scores"):
                scores = ", ".join(f"x{f:g} {v:.4f}" for f, v in r["kl_scores"].items())
                print(f"{r['method']}: beta chosen x{r['kl_factor']:g} of the base weight (held-out check NLL {scores})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": results}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
