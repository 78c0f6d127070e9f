"""Training-step time of the latent kernels: built-in (hand-written) against gpytorch's.

One training step (gather a mini-batch, ELBO forward, backward, Adam step) of a GPVAE on a
synthetic K-variable field (``--vars``), timed for the built-in ``matern32`` kernel and for the same kernel
written as ``ScaleKernel(MaternKernel(nu=1.5, ard_num_dims=D))``, for SPA and HPA, on scattered
points (every neighbourhood its own covariance block) and on a grid (shared stencils).
Prints the median over ``--repeats`` runs of ``--steps`` steps, and the machine.

    OMP_NUM_THREADS=1 python benchmarks/kernels.py --threads 1

Run it against another checkout with ``PYTHONPATH=<checkout>`` to compare versions; the
gpytorch rows need a version whose ``kernel=`` accepts gpytorch kernels.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine import data as training_data
from geogpvae.engine.batches import epoch_batches
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine, build_model

FIELD_DATA = training_data.field_data


def _kernels(n_dims: int) -> dict[str, object]:
    out: dict[str, object] = {"builtin matern32": "matern32"}
    try:
        from gpytorch.kernels import MaternKernel, ScaleKernel

        from geogpvae.gp import user_kernels  # noqa: F401  (present where kernel= takes gpytorch)
    except ImportError:
        return out
    out["gpytorch Matern(1.5)"] = ScaleKernel(MaternKernel(nu=1.5, ard_num_dims=n_dims))
    return out


def _step_time(points: np.ndarray, engine: str, kernel: object, steps: int, repeats: int,
               n_vars: int) -> float:
    field = make_field(points, n_vars=n_vars, n_latent=2, lengthscale=4.0, missing=0.5, rng=0)
    cfg = GPVAEConfig(engine=engine, neighbours=20, batch_size=256, epochs=1, kernel=kernel,
                      ordering="auto", context=0)
    eng = GPVAEEngine(cfg, progress=False)
    y = np.where(field.observed, field.truth, 0.0)
    data = FIELD_DATA(points, y, field.observed, cfg, device=eng.device, dtype=eng.dtype)
    model = build_model(cfg, n_vars, points.shape[1], len(points), lengthscale=2.0, device=eng.device)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    batches = epoch_batches(data.n, cfg.batch_size, seed=0, epoch=0, order=data.order)
    times = []
    for r in range(repeats + 1):  # the first run warms up
        start = time.perf_counter()
        for idx in batches[:steps]:
            batch = training_data.gather_batch(data, idx, mask_rate=cfg.mask_rate)
            loss = model(batch)["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
        if r:
            times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--vars", type=int, default=3,
                   help="variables K; the model has L = max(2, K - 1) latent channels")
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
    # the engine is imported looks like torch's default to it
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    layouts = {"scattered 6000": rng.uniform(0, 80, (6000, 2)), "grid 60x100": grid_points((60, 100))}
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, K = {args.vars}; "
          "ms per step (median)")
    for layout, points in layouts.items():
        for engine in ("spa", "hpa"):
            row = [f"{layout:15s} {engine}"]
            for name, kernel in _kernels(points.shape[1]).items():
                row.append(f"{name}: {1e3 * _step_time(points, engine, kernel, args.steps, args.repeats, args.vars):7.2f}")
            print("  ".join(row), flush=True)


if __name__ == "__main__":
    main()
