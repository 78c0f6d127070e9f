"""Where the time of one training step goes: gather, forward, backward, on SPE10's task size.

A synthetic 4-variable field on a 43 x 110 x 30 grid (141,900 locations, half of the values
missing), H = 20, mini-batches of 1,000. Times the first ``--batches`` mini-batches of an epoch
(gathering, forward, backward and Adam step separately), counts the distinct locations each
batch encodes, extrapolates to an epoch, and prints the torch profiler's table of operators.

    python benchmarks/profile_step.py --engine spa --ordering random --batching random
    python benchmarks/profile_step.py --engine spa                 # package defaults (auto)
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.training import epoch_batches, field_data, gather_batch, resolve_layout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=["spa", "hpa"], default="spa")
    p.add_argument("--ordering", default="auto")
    p.add_argument("--batching", default="auto")
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--options", default="{}", help="other GPVAEConfig options as JSON")
    p.add_argument("--rows", type=int, default=15, help="rows of the profiler table (0: none)")
    args = p.parse_args()
    field = make_field(grid_points((43, 110, 30)), n_vars=4, n_latent=3, lengthscale=4.0, missing=0.5, rng=0)
    settings = dict(engine=args.engine, neighbours=20, batch_size=1000, epochs=1, kernel="cauchy",
                    ordering=args.ordering, batching=args.batching)
    cfg = GPVAEConfig(**{**settings, **json.loads(args.options)})  # --options override the defaults
    eng = GPVAEEngine(cfg, progress=False)
    x, y = field.points, np.where(field.observed, field.truth, 0.0)
    data = field_data(x, y, field.observed, cfg, device=eng.device, dtype=eng.dtype)
    eng.lengthscale_ = 2.0
    model = eng._build_model(4, x.shape[1], len(x))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    batches = epoch_batches(data.n, cfg.batch_size, seed=0, epoch=0, order=data.order)
    use = batches[: args.batches]
    t_gather = t_fwd = t_bwd = 0.0
    encoded = 0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for idx in use:
            a = time.perf_counter()
            batch = gather_batch(data, idx, mask_rate=cfg.mask_rate)
            b = time.perf_counter()
            out = model(batch)
            c = time.perf_counter()
            opt.zero_grad()
            out["loss"].backward()
            opt.step()
            d = time.perf_counter()
            t_gather, t_fwd, t_bwd = t_gather + b - a, t_fwd + c - b, t_bwd + d - c
            encoded += batch.y.shape[0]
    n = len(use)
    ordering, batching = resolve_layout(x, cfg)
    print(f"{args.engine.upper()}-H20, ordering {ordering}, batching {batching}, {torch.get_num_threads()} threads")
    print(f"per batch: gather {1e3 * t_gather / n:.1f} ms, forward {1e3 * t_fwd / n:.1f} ms, "
          f"backward + step {1e3 * t_bwd / n:.1f} ms; distinct locations encoded {encoded / n:.0f}; "
          f"epoch ({len(batches)} batches) about {(t_gather + t_fwd + t_bwd) / n * len(batches):.2f} s")
    if args.rows:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
