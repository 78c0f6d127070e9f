"""Speed of both engines with the package defaults on a field the size of SPE10's task.

A synthetic 4-variable Gaussian-process field on a 43 x 110 x 30 grid (141,900 locations, the
size of the paper's downsampled SPE10), half of the values missing. For each engine, with the
package defaults (only ``engine`` set), in a fresh process so that its peak memory is its own:

* neighbour structures: the time to build the training tensors (neighbour sets, orderings,
  shared stencils, context summaries);
* s/epoch: mean training time per epoch;
* end to end: ``fit`` (neighbours, training, calibration) plus ``predict`` at every location;
* peak RSS of the process (and, on a GPU, the peak GPU memory torch allocated);
* roofline ratio: s/epoch divided by one forward and backward pass of the encoder and
  decoder over the N locations (what an epoch would cost if the networks were all it did).

Prints the machine (CPU, threads, GPU or "no GPU").

    python benchmarks/speed.py --threads 2                 # both engines, package defaults
    python benchmarks/speed.py --engine spa --options '{"batch_size": 1000}'
    python benchmarks/speed.py --device cuda               # on a GPU machine
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.data import field_data, resolve_device, resolve_layout

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line


def machine(device: str) -> str:
    dev = resolve_device(device)
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "no GPU"
    return (f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, {gpu}, "
            f"torch {torch.__version__}")


def roofline(engine: GPVAEEngine, data, chunk: int = 16384) -> float:
    """Seconds of one forward+backward pass of encoder and decoder over all locations."""
    model = engine.model
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        for part in torch.arange(data.n, device=data.x.device).split(chunk):
            ctx = None if data.context is None else data.context[part]
            mean, var = model.encode(data.y[part], data.observed[part], ctx)
            out = model.decode(mean + var.sqrt() * torch.randn_like(mean))
            out.square().mean().backward()
        if data.x.device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    model.zero_grad(set_to_none=True)
    return best


def one_engine(args) -> dict:
    shape = tuple(int(v) for v in args.shape.split(","))
    field = make_field(grid_points(shape), n_vars=4, n_latent=3, lengthscale=4.0, missing=0.5, rng=0)
    options = {"engine": args.engine, "device": args.device, **json.loads(args.options)}
    if args.epochs is not None:
        options["epochs"] = args.epochs
    cfg = GPVAEConfig(**options)
    x, values = field.points, field.values
    eng = GPVAEEngine(cfg, progress=False)
    y = np.where(field.observed, field.truth, 0.0)
    t = time.perf_counter()
    data = field_data(x, y, field.observed, cfg, device=eng.device, dtype=eng.dtype)
    prep = time.perf_counter() - t
    del data
    t = time.perf_counter()
    eng.fit(x, values)
    fit_s = time.perf_counter() - t
    pred = eng.predict()
    total = time.perf_counter() - t
    hist = eng.history
    epochs = len(hist["epoch"])
    per_epoch = hist["elapsed"][-1] / max(epochs, 1)
    roof = roofline(eng, eng._data)
    hidden = ~field.observed
    rmse = float(np.sqrt(np.mean((pred.mean[hidden] - field.truth[hidden]) ** 2)))
    raw = eng.predict(calibrated=False)  # after the timings: the predictive before calibration

    def coverage(p):
        return [round(float(np.mean(np.abs(p.mean[hidden[:, j], j] - field.truth[hidden[:, j], j])
                                    < 1.959964 * p.std[hidden[:, j], j])), 3) for j in range(hidden.shape[1])]

    return {"engine": args.engine, "layout": resolve_layout(x, cfg), "batch": cfg.batch_for(len(x)),
            "neighbours_s": prep, "epochs": epochs, "steps": eng.train_state.steps, "s_per_epoch": per_epoch,
            "fit_s": fit_s, "end_to_end_s": total, "roofline_s": roof, "roofline_ratio": per_epoch / roof,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rmse_hidden": rmse,
            "peak_gpu_mib": (torch.cuda.max_memory_allocated(eng.device) / 2**20
                             if eng.device.type == "cuda" else None),
            "cov95_raw": coverage(raw), "cov95": coverage(pred),
            "factors": np.round(np.atleast_2d(eng.calibration_), 2).tolist(),
            "machine": machine(args.device)}


def gpu_memory(result: dict) -> str:
    """", peak GPU memory N MiB" for a run on a GPU, else nothing."""
    mib = result.get("peak_gpu_mib")
    return "" if mib is None else f", peak GPU memory {mib:.0f} MiB"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=["spa", "hpa", "both"], default="both")
    p.add_argument("--shape", default="43,110,30")
    p.add_argument("--epochs", type=int, default=None, help="fixed epochs (default: the package's rule)")
    p.add_argument("--options", default="{}", help="other GPVAEConfig options as JSON")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(one_engine(args)))
        return
    print(f"machine: {machine(args.device)}")
    print(reference_line(), flush=True)
    print(f"field: {args.shape.replace(',', ' x ')} grid, 4 variables, 50% missing; options {args.options}", flush=True)
    engines = ["spa", "hpa"] if args.engine == "both" else [args.engine]
    for engine in engines:
        cmd = [sys.executable, __file__, "--child", "--engine", engine, "--shape", args.shape,
               "--options", args.options, "--device", args.device]
        cmd += ["--epochs", str(args.epochs)] if args.epochs is not None else []
        cmd += ["--threads", str(args.threads)] if args.threads else []
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode != 0:  # show why, e.g. on a GPU machine run once with little time
            sys.exit(f"{engine.upper()} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{engine.upper()}-H20 ({'/'.join(r['layout'])}, batch {r['batch']}): neighbour structures "
              f"{r['neighbours_s']:.1f} s, {r['s_per_epoch']:.2f} s/epoch over {r['epochs']} epochs "
              f"({r['steps']} steps), fit {r['fit_s']:.1f} s, end to end {r['end_to_end_s']:.1f} s, "
              f"peak RSS {r['peak_rss_mib']:.0f} MiB{gpu_memory(r)}, roofline {r['roofline_s']:.2f} s "
              f"(ratio {r['roofline_ratio']:.1f}), RMSE at hidden values {r['rmse_hidden']:.3f}", flush=True)
        print(f"  95 % coverage of the hidden values per variable: before calibration {r['cov95_raw']}, after "
              f"{r['cov95']}; variance factors (own values / none) {r['factors']}", flush=True)


if __name__ == "__main__":
    main()
