"""Seconds per training epoch of the SPA and HPA engines on a field the size of SPE10's task.

A synthetic 4-variable Gaussian-process field on a 43 x 110 x 30 grid (141,900 locations, the
size of the paper's downsampled SPE10), half of the values missing, H = 20 neighbours,
mini-batches of 1000. Prints the time to build the neighbour structures, seconds per epoch
(mean over the timed epochs, after one warm-up epoch), and the peak resident memory.

    python benchmarks/speed.py                      # both engines, package defaults
    python benchmarks/speed.py --engine spa --batching spatial --epochs 3
"""

from __future__ import annotations

import argparse
import platform
import resource
import time

import numpy as np
import torch

from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.training import field_data, resolve_device, resolve_layout, train


def machine() -> str:
    dev = resolve_device("auto")
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "no GPU"
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, {gpu}, torch {torch.__version__}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=["spa", "hpa", "both"], default="both")
    p.add_argument("--shape", default="43,110,30")
    p.add_argument("--neighbours", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--batching", choices=["random", "spatial"], default=None)
    p.add_argument("--ordering", choices=["random", "maxmin", "sorted", "none"], default=None,
                   help="SPA ordering (sorted: shared conditioning geometries on grids)")
    p.add_argument("--epochs", type=int, default=2, help="timed epochs (after one warm-up)")
    p.add_argument("--hidden", default=None, help="hidden widths for encoder and decoder, e.g. 128,128")
    p.add_argument("--context", type=int, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="float32")
    args = p.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    t = time.perf_counter()
    field = make_field(grid_points(shape), n_vars=4, n_latent=3, lengthscale=4.0, missing=0.5, rng=0)
    print(f"machine: {machine()}")
    print(f"field: {len(field.points)} locations x 4 variables, 50% missing (generated in {time.perf_counter() - t:.1f} s)")
    engines = ["spa", "hpa"] if args.engine == "both" else [args.engine]
    for engine in engines:
        opts = dict(engine=engine, neighbours=args.neighbours, batch_size=args.batch_size,
                    epochs=args.epochs + 1, device=args.device, dtype=args.dtype, kernel="cauchy")
        if args.batching:
            opts["batching"] = args.batching
        if args.ordering:
            opts["ordering"] = args.ordering
        if args.hidden:
            w = tuple(int(v) for v in args.hidden.split(","))
            opts.update(encoder_hidden=w, decoder_hidden=w)
        if args.context is not None:
            opts["context"] = args.context
        cfg = GPVAEConfig(**opts)
        eng = GPVAEEngine(cfg, progress=False)
        # use the engine's own preparation and model construction, timed separately
        x = field.points
        y = np.where(field.observed, field.truth, 0.0)
        t = time.perf_counter()
        data = field_data(x, y, field.observed, cfg, device=eng.device, dtype=eng.dtype)
        prep = time.perf_counter() - t
        eng.lengthscale_ = 2.0
        model = eng._build_model(4, x.shape[1], len(x))
        state = train(model, data, cfg, progress=False)
        layout = resolve_layout(x, cfg)
        el = np.diff([0.0, *state.history["elapsed"]])
        per_epoch = el[1:].mean() if len(el) > 1 else el[0]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{engine.upper()}-H{args.neighbours} batch {args.batch_size} batching {layout[1]} "
            f"{'ordering ' + layout[0] + ' ' if engine == 'spa' else ''}"
            f"hidden {cfg.encoder_hidden}/{cfg.decoder_hidden} context {cfg.context}: "
            f"neighbour structures {prep:.2f} s, {per_epoch:.2f} s/epoch "
            f"(epochs {', '.join(f'{v:.2f}' for v in el)}), peak RSS {peak:.0f} MiB"
        )


if __name__ == "__main__":
    main()
