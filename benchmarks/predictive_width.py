"""Where the raw (uncalibrated) predictive variance comes from, on a smooth synthetic field.

The field of ``benchmarks/speed.py`` (4 variables mixed from 3 latent GPs of lengthscale 4
cells, noise standard deviation 0.05, half of the values hidden) on a smaller grid. After one
fit with the package defaults (plus ``--options``) it prints, per variable and in standardised
units: the likelihood variance at its start and after training, the field's true noise
variance, the mean squared error at the hidden values, the mean raw predictive variance there
and its two parts (decoded latent spread, added variance), raw 95 % coverage, the variance
factors calibration learnt, the latent kernels' lengthscales and outputscales, and the KL
weight ``beta="auto"`` chose.

Use a field seed other than 0 (the one ``speed.py`` scores) to diagnose or to tune::

    python benchmarks/predictive_width.py --field-seed 1
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import time

import numpy as np
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine

NOISE_SD = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="20,40,15", help="grid shape")
    parser.add_argument("--field-seed", type=int, default=1)
    parser.add_argument("--options", default="{}", help="engine options as JSON")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
    # the engine is imported looks like torch's default to it
    torch.set_num_threads(args.threads)
    shape = tuple(int(v) for v in args.shape.split(","))
    field = make_field(grid_points(shape), n_vars=4, n_latent=3, lengthscale=4.0, missing=0.5,
                       noise=NOISE_SD, rng=args.field_seed)
    print(f"field {shape}, seed {args.field_seed}; machine {platform.machine()}, {args.threads} threads, "
          f"torch {torch.__version__}")
    eng = GPVAEEngine(GPVAEConfig(**json.loads(args.options)), progress=False)
    t = time.perf_counter()
    eng.fit(field.points, field.values)
    print(f"fit {time.perf_counter() - t:.1f} s, {eng.train_state.steps} steps; beta factor {eng.kl_factor_} "
          f"(candidates' held-out NLL {({k: round(v, 3) for k, v in eng.kl_scores_.items()})})")
    raw = eng.predict(calibrated=False)
    hidden = ~field.observed
    scale2 = eng.scale**2
    err2 = (raw.mean - field.truth) ** 2 / scale2
    var = raw.std**2 / scale2
    added = eng.model.hidden_var.detach().double().numpy()
    rows = {
        "likelihood variance, start": eng.noise_start_,
        "likelihood variance, learnt": eng.model.noise_var.detach().double().numpy(),
        "true noise variance": NOISE_SD**2 / scale2,
        "squared error at hidden values": [err2[hidden[:, j], j].mean() for j in range(4)],
        "raw predictive variance there": [var[hidden[:, j], j].mean() for j in range(4)],
        "  of which decoded latent spread": [var[hidden[:, j], j].mean() - added[j] for j in range(4)],
        "  of which added variance": added,
        "raw 95% coverage": [np.mean(np.sqrt(err2[hidden[:, j], j]) < 1.959964 * np.sqrt(var[hidden[:, j], j]))
                             for j in range(4)],
    }
    for name, vals in rows.items():
        print(f"{name:34s}", " ".join(f"{v:8.4f}" for v in np.asarray(vals, dtype=float)))
    print("variance factors of calibration (with own values; without):", np.round(eng.calibration_, 3).tolist())
    kernel = eng.model.kernel
    print("latent lengthscales (cells):", np.round(kernel.lengthscale.detach().numpy(), 2).tolist())
    print("latent outputscales:", np.round(kernel.outputscale.detach().numpy(), 3).tolist())


if __name__ == "__main__":
    main()
