"""Where the time of one training step goes: gather, forward, backward, on SPE10's task size.

A synthetic 4-variable field on a 43 x 110 x 30 grid (141,900 locations, half of the values
missing), H = 20, mini-batches of 1,000. Times the first ``--batches`` mini-batches of an epoch
(gathering, forward, backward and Adam step separately), counts the distinct locations each
batch encodes, extrapolates to an epoch, and prints the torch profiler's table of operators.

    python benchmarks/profile_step.py --engine spa --ordering random
    python benchmarks/profile_step.py --engine spa                 # package defaults (auto)
    python benchmarks/profile_step.py --device cuda --options '{"batch_size": 4096}'   # on a GPU

On a GPU the phases are timed with a synchronisation at each boundary, the profiler records
the kernels too, and the table is sorted by their time; a line compares the host's time per
step with the kernels' (a step whose host time is far above its kernel time is bound by
Python and kernel launches, not by the GPU's arithmetic).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.batches import epoch_batches
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine, build_model
from geogpvae.engine.data import field_data, gather_batch, resolve_layout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=["spa", "hpa"], default="spa")
    p.add_argument("--ordering", default="auto")
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--options", default="{}", help="other GPVAEConfig options as JSON")
    p.add_argument("--rows", type=int, default=15, help="rows of the profiler table (0: none)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    args = p.parse_args()
    field = make_field(grid_points((43, 110, 30)), n_vars=4, n_latent=3, lengthscale=4.0, missing=0.5, rng=0)
    settings = dict(engine=args.engine, neighbours=20, batch_size=1000, epochs=1, kernel="cauchy",
                    ordering=args.ordering, device=args.device)
    cfg = GPVAEConfig(**{**settings, **json.loads(args.options)})  # --options override the defaults
    eng = GPVAEEngine(cfg, progress=False)
    x, y = field.points, np.where(field.observed, field.truth, 0.0)
    data = field_data(x, y, field.observed, cfg, device=eng.device, dtype=eng.dtype)
    model = build_model(cfg, 4, x.shape[1], len(x), lengthscale=2.0, device=eng.device)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    batches = epoch_batches(data.n, cfg.batch_size, seed=0, epoch=0, order=data.order)
    use = batches[: args.batches]
    cuda = data.x.device.type == "cuda"

    def step(idx):
        batch = gather_batch(data, idx, mask_rate=cfg.mask_rate)
        out = model(batch)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()

    for idx in batches[-3:]:  # warm-up: CUDA context, library handles, allocator
        step(idx)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t = time.perf_counter()  # the training rate: steps back to back, one synchronisation at the end
    for idx in use:
        step(idx)
    sync()
    free_ms = 1e3 * (time.perf_counter() - t) / len(use)
    t_gather = t_fwd = t_bwd = 0.0
    encoded = 0
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for idx in use:
            a = time.perf_counter()
            batch = gather_batch(data, idx, mask_rate=cfg.mask_rate)
            sync()
            b = time.perf_counter()
            out = model(batch)
            sync()
            c = time.perf_counter()
            opt.zero_grad()
            out["loss"].backward()
            opt.step()
            sync()
            d = time.perf_counter()
            t_gather, t_fwd, t_bwd = t_gather + b - a, t_fwd + c - b, t_bwd + d - c
            encoded += batch.y.shape[0]
    n = len(use)
    ordering, batching = resolve_layout(x, cfg)
    where = torch.cuda.get_device_name(data.x.device) if cuda else f"{torch.get_num_threads()} threads"
    print(f"{args.engine.upper()}-H20, ordering {ordering}, batching {batching}, batch {cfg.batch_size}, {where}")
    print(f"per batch: gather {1e3 * t_gather / n:.1f} ms, forward {1e3 * t_fwd / n:.1f} ms, "
          f"backward + step {1e3 * t_bwd / n:.1f} ms; distinct locations encoded {encoded / n:.0f}; "
          f"epoch ({len(batches)} batches) about {(t_gather + t_fwd + t_bwd) / n * len(batches):.2f} s")
    print(f"steps back to back (no synchronisation between them): {free_ms:.1f} ms per step, epoch about "
          f"{free_ms * len(batches) / 1e3:.2f} s")
    events = prof.key_averages()
    if cuda:
        on_gpu = [e for e in events if e.device_type.name == "CUDA"]  # kernels, copies, fills
        kernel_ms = sum(e.self_device_time_total for e in on_gpu) / n / 1e3
        print(f"per step: {1e3 * (t_gather + t_fwd + t_bwd) / n:.1f} ms on the host clock, "
              f"{kernel_ms:.1f} ms of GPU work in {sum(e.count for e in on_gpu) / n:.0f} kernels and copies")
    if args.rows:
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        print(events.table(sort_by=key, row_limit=args.rows))


if __name__ == "__main__":
    main()
