"""Where the seconds of ``fit`` and ``predict`` go, phase by phase, on SPE10's task size.

The same synthetic field as ``speed.py`` (4 variables on a 43 x 110 x 30 grid, half missing),
package defaults. The phases of the engine are timed by wrapping the functions that
:mod:`geogpvae.engine.core` calls (on a GPU with a synchronisation at each boundary, so that
asynchronous kernels are charged to the phase that launched them). ``selection`` holds the
candidates' training runs of ``beta="auto"`` and their scoring; ``training`` the epochs left to the
chosen candidate after it.

Then the time of one training step against the batch size: for each size, a fresh model
trained for a few epochs on the same tensors (steps and ms/step; no accuracy, see ``speed.py``
with ``--options '{"batch_size": B}'`` for that).

    python benchmarks/fit_phases.py                          # the VM, two threads
    python benchmarks/fit_phases.py --device cuda --batches 4096,16384,65536,141900
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import geogpvae.engine.core as core
from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine, build_model
from geogpvae.engine.data import field_data
from geogpvae.engine.training import train

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line

#: (label, name in geogpvae.engine.core) of the phases timed
PHASES = [
    ("standardise", "GPVAEEngine._standardise"),
    ("metric", "GPVAEEngine._metric"),
    ("start lengthscale", "GPVAEEngine._lengthscale_for"),
    ("context radius", "context_radius"),
    ("nugget", "nugget"),
    ("clustered gaps", "clustered_gaps"),
    ("hold-outs", "held_out"),
    ("context index", "context_index"),
    ("field tensors", "field_data"),
    ("context hiding", "with_context_hiding"),
    ("selection (beta='auto')", "select_kl_factor"),
    ("training", "train"),
    ("anchors", "Posterior.anchors"),
    ("calibration", "calibrate"),
    ("predict", "GPVAEEngine.predict"),
]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def wrap_phases(seconds: dict[str, float], calls: dict[str, int]) -> None:
    """Replace each phase's function by one that adds its wall time to ``seconds``."""
    for label, name in PHASES:
        owner_name, _, attr = name.rpartition(".")
        owner = getattr(core, owner_name) if owner_name else core
        inner = getattr(owner, attr)

        def timed(*args, _inner=inner, _label=label, **kwargs):
            _sync()
            start = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                _sync()
                seconds[_label] += time.perf_counter() - start
                calls[_label] += 1

        setattr(owner, attr, functools.wraps(inner)(timed))


def step_times(field, device: str, batches: list[int], epochs: int) -> list[dict]:
    """ms per optimiser step and s per epoch for each batch size (fresh model each)."""
    rows = []
    x, y = field.points, np.where(field.observed, field.truth, 0.0)
    for batch in batches:
        cfg = GPVAEConfig(device=device, batch_size=batch, epochs=epochs, beta=1.0, calibrate=False)
        eng = GPVAEEngine(cfg, progress=False)
        data = field_data(x, y, field.observed, cfg, device=eng.device, dtype=eng.dtype)
        model = build_model(cfg, y.shape[1], x.shape[1], len(x), lengthscale=2.0, device=eng.device)
        train(model, data, cfg.replace(epochs=1), progress=False)  # warm-up: kernels, allocator
        _sync()
        start = time.perf_counter()
        state = train(model, data, cfg, progress=False)
        _sync()
        elapsed = time.perf_counter() - start
        rows.append({"batch": min(batch, len(x)), "steps": state.steps, "ms_per_step": 1e3 * elapsed / state.steps,
                     "s_per_epoch": elapsed / epochs})
    return rows


def print_steps(steps: list[dict]) -> None:
    """The step timings as a table."""
    if steps:
        print(f"{'batch':>8} {'steps':>6} {'ms/step':>8} {'s/epoch':>8}", flush=True)
    for row in steps:
        print(f"{row['batch']:>8} {row['steps']:>6} {row['ms_per_step']:8.2f} {row['s_per_epoch']:8.3f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="43,110,30")
    p.add_argument("--device", default="auto")
    p.add_argument("--engine", choices=["spa", "hpa"], default="spa")
    p.add_argument("--batches", default="1024,4096,16384", help="batch sizes of the step timings ('' for none)")
    p.add_argument("--step-epochs", type=int, default=3, help="epochs timed per batch size")
    p.add_argument("--steps-only", action="store_true", help="only the step timings, no fit")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    field = make_field(grid_points(shape), n_vars=4, n_latent=3, lengthscale=4.0, missing=0.5, rng=0)
    if args.steps_only:
        print_steps(step_times(field, args.device, [int(b) for b in args.batches.split(",")], args.step_epochs))
        return
    seconds: dict[str, float] = collections.defaultdict(float)
    calls: dict[str, int] = collections.defaultdict(int)
    wrap_phases(seconds, calls)
    eng = GPVAEEngine(GPVAEConfig(engine=args.engine, device=args.device), progress=False)
    print(f"device {eng.device}, {torch.get_num_threads()} threads, torch {torch.__version__}"
          + (f", {torch.cuda.get_device_name(eng.device)}" if eng.device.type == "cuda" else ""))
    print(reference_line())
    values = np.where(field.observed, field.truth, np.nan)
    start = time.perf_counter()
    eng.fit(field.points, values)
    fit_s = time.perf_counter() - start
    pred = eng.predict()
    total = time.perf_counter() - start
    hidden = ~field.observed
    rmse = float(np.sqrt(np.mean((pred.mean[hidden] - field.truth[hidden]) ** 2)))
    print(f"{args.shape.replace(',', ' x ')} grid, {args.engine.upper()}: fit {fit_s:.1f} s, fit + predict "
          f"{total:.1f} s, {len(eng.history['epoch'])} epochs, {eng.train_state.steps} steps, RMSE {rmse:.3f}")
    print(f"{'phase':<26} {'s':>7} {'share':>6} calls")
    for label, _ in PHASES:
        if calls[label]:
            print(f"{label:<26} {seconds[label]:7.2f} {seconds[label] / total:6.1%} {calls[label]:>5}")
    sizes = [int(b) for b in args.batches.split(",")] if args.batches else []
    steps = step_times(field, args.device, sizes, args.step_epochs)
    print_steps(steps)
    if args.json:
        Path(args.json).write_text(json.dumps({"fit_s": fit_s, "total_s": total, "rmse": rmse,
                                               "phases": dict(seconds), "calls": dict(calls), "steps": steps}))


if __name__ == "__main__":
    main()
