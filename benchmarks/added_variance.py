"""Which variance the predictive adds, per SPE10 channel, and why: calibration's own evidence.

Fits the SPE10 task (``benchmarks/spe10.py``'s field and mask) with the package defaults (plus
``--options``), then repeats calibration's scoring of held-out *observed* values (the same
rounds and seeds as ``fit``) and prints, for the source chosen for cells with values of their
own and for each added variance (the likelihood variance, the per-variable and the per-pattern
hidden-value variance), each channel's calibration factor and calibrated NLL (nats per
held-out value), which variances clearly beat which (two paired standard errors), and the
variance chosen. No dropped value is read: use it on any mask, the tuning masks included::

    python benchmarks/added_variance.py --mask-seed 1 --threads 2

Needs the SPE10 files (GEOGPVAE_DATA_DIR).
"""

from __future__ import annotations

import os
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

import geogpvae
from geogpvae.engine import calibration as cal
from geogpvae.engine.posterior import REGIMES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spe10 import load_task


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mask-seed", type=int, default=1, help="seed of the dropped values (0 is the scored mask)")
    p.add_argument("--engine", default="spa", choices=["spa", "hpa"])
    p.add_argument("--seed", type=int, default=0, help="seed of the model")
    p.add_argument("--options", default="{}", help="extra engine options as JSON")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    ds, names, truth, keep = load_task(False, args.mask_seed)
    work = ds[["porosity"]].copy()
    for c, n in enumerate(names):
        work[n] = (("z", "y", "x"), np.where(keep[..., c], truth[..., c], np.nan))
    del truth  # only the kept values are used below
    work = work[names]
    options = dict(engine=args.engine, neighbours=20, seed=args.seed, progress="none")
    options.update(json.loads(args.options))
    eng = geogpvae.GPVAEImputer(**options).fit(work, vars=names).engine_
    print(f"mask seed {args.mask_seed}, {args.engine}: sources {eng.predict_mode_}; beta x{eng.kl_factor_:g}")
    print(f"variance chosen per regime: {eng.noise_}")
    noises = cal.noise_choices(eng.model)
    if not noises:
        print("no added variance to choose (mask_rate=0)")
        return
    cfg, k = eng.config, len(names)
    rng = np.random.default_rng(cfg.seed + 7)  # the rounds calibrate() drew
    post = eng.posterior().replace(predict_mode=None, noise={}, calibration=None)
    candidates = cal.calibration_candidates(post)
    stats = {(r, f"{m}|{n}"): ([[] for _ in range(k)], [[] for _ in range(k)])
             for r in REGIMES for m in candidates[r] for n in noises}
    for _ in range(5):
        hide, rows = cal.hide_values(post.train_observed, rng, 0.1, 0.05, 8000)
        cal.score_hidden(post, hide, rows, candidates, stats, noises=noises)
    for regime in REGIMES:
        source = eng.predict_mode_[regime] if isinstance(eng.predict_mode_, dict) else eng.predict_mode_
        options_ = [stats[(regime, f"{source}|{n}")] for n in noises]
        print(f"\n{regime} (source {source}): factor / calibrated NLL per variance; B>A: B clearly beats A")
        for j, name in enumerate(names):
            cells = []
            for n, o in zip(noises, options_, strict=True):
                f, nll = cal.regime_factors([o[0][j]], [o[1][j]])
                cells.append(f"{n} {f[0]:.2f} / {nll:.4f}" if nll is not None else f"{n} -")
            beats = [f"{noises[b]}>{noises[a]}" for a in range(len(noises)) for b in range(len(noises))
                     if a != b and cal.clearly_better(options_[a], options_[b], only=j)]
            print(f"  {name:10s} " + " | ".join(cells) + f" | {', '.join(beats) or 'none clearly better'}"
                  f" | chosen {eng.noise_.get(regime, ['-'] * k)[j]}")


if __name__ == "__main__":
    main()
