"""SPE10: how each beta candidate of ``beta="auto"`` scores its held-out check values, epoch by epoch.

The selection (``geogpvae/engine/selection.py``) trains one model per candidate KL weight for a
share of the epoch budget and keeps the one whose check values (a tenth of the *observed*
values, held out of training) it predicts best. This script runs the SPE10 task of
``benchmarks/spe10.py`` up to the end of the selection and prints, after every epoch of every
candidate, the calibrated check NLL the selection ranks by, the uncalibrated NLL and the RMSE
of the check values (standardised units, mean over channels). It stops before the rest of the
training, so no dropped value is predicted or read: any mask may be traced, and the eighth and
ninth sessions traced tuning masks only.

    python benchmarks/beta_trace.py --mask-seed 8 --threads 2
    python benchmarks/beta_trace.py --mask-seed 8 --threads 2 \\
        --options '{"extra": {"kl_factors": [1, 0.5, 0.2], "selection_share": 0.35}}'

Needs the SPE10 files (GEOGPVAE_DATA_DIR).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

import geogpvae.engine.core as engine_core
from geogpvae.engine import selection
from geogpvae.engine.training import check_inputs

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spe10


class SelectionDone(Exception):
    """Raised after the selection: the trace is complete and nothing else is needed."""


@torch.no_grad()
def check_scores(model: torch.nn.Module, data, state, seed: int) -> dict[str, float]:
    """Calibrated and raw NLL (nats per value) and RMSE of the check values, moving-average weights."""
    core = model.module if hasattr(model, "module") else model
    inputs, eps = check_inputs(data, core.latent_dim, seed=seed)
    live = {k: v.detach().clone() for k, v in core.state_dict().items()}
    if state.average is not None:
        core.load_state_dict({**live, **state.average})
    core.eval()
    try:
        mean, var = core.encode(*inputs)
        pred = core.decode(mean + var.sqrt() * eps)
        mu, v = pred.mean(0), pred.var(0, unbiased=False) + core.hidden_var
        mask = data.check.mask.to(v.dtype)
        count = mask.sum(0).clamp_min(1)
        err2 = (data.check.y - mu).square()
        factor = (err2 / v * mask).sum(0) / count  # each channel's best variance factor
        raw = (0.5 * (torch.log(2 * math.pi * v) + err2 / v) * mask).sum(0) / count
        cal = (0.5 * (torch.log(2 * math.pi * v * factor) + err2 / (v * factor)) * mask).sum(0) / count
        rmse = ((err2 * mask).sum(0) / count).mean().sqrt()
        return {"nll": float(cal.mean()), "raw nll": float(raw.mean()), "rmse": float(rmse)}
    finally:
        core.load_state_dict(live)
        core.train(True)


def install_trace(rows: list[dict]) -> None:
    """Wrap the selection so that every candidate epoch appends its check scores to ``rows``."""
    select, train = selection.select_kl_factor, selection.train
    context: dict = {}

    def traced_select(build, data, config, **kw):
        context["data"], context["seed"] = data, config.seed
        chosen = select(build, data, config, **kw)
        raise SelectionDone(chosen.factor)

    def traced_train(model, fitting, config, *, callback=None, **kw):
        def after_epoch(state, core, optimizer):
            if callback is not None:
                callback(state, core, optimizer)
            row = {"weight": core.beta, "epoch": state.epoch}
            row.update(check_scores(model, context["data"], state, context["seed"]))
            rows.append(row)
            print(f"KL weight {row['weight']:8.4g}  epoch {row['epoch']:3d}  check NLL {row['nll']:.4f}  "
                  f"raw NLL {row['raw nll']:.4f}  RMSE {row['rmse']:.4f}", flush=True)
        return train(model, fitting, config, callback=after_epoch, **kw)

    engine_core.select_kl_factor = traced_select
    selection.train = traced_train


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mask-seed", type=int, default=1, help="seed of the dropped values (tuning masks: 1-8)")
    p.add_argument("--engine", default="spa", choices=["spa", "hpa"])
    p.add_argument("--options", default="{}", help="extra engine options as JSON")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--downsample", type=int, default=2, help="every k-th cell per axis (2: the paper task; 1: full)")
    args = p.parse_args()
    rows: list[dict] = []
    install_trace(rows)
    sys.argv = ["spe10.py", "--mask-seed", str(args.mask_seed), "--engine", args.engine, "--no-references",
                "--progress", "none", "--options", args.options, "--downsample", str(args.downsample)]
    if args.threads:
        sys.argv += ["--threads", str(args.threads)]
    try:
        spe10.main()
    except SelectionDone as done:
        last = {}
        for row in rows:
            last[row["weight"]] = row
        summary = ", ".join(f"weight {b:g} (epoch {r['epoch']}): {r['nll']:.4f}" for b, r in last.items())
        print(f"chosen: beta {done.args[0]:g} of the base weight; check NLL at the choice: {summary}")
    else:
        raise SystemExit("the fit ran no beta selection (an explicit beta?)")


if __name__ == "__main__":
    main()
