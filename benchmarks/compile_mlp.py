"""Does ``torch.compile`` pay for the engine's networks? Eager against compiled, one pass each.

Builds the package-default model for a 3-variable field (the encoder and decoder a Jura fit
trains), then times one forward and backward pass of encoder -> latent draw -> decoder over
``--rows`` locations, eagerly and through ``torch.compile`` (default mode, inductor), and the
first compiled call (the compilation). The networks are most of the arithmetic of a training
step (the rest is the prior's small Cholesky factors and the gathers), so if compiling them does
not pay, compiling the step would not either; a whole step does not compile as one graph (the
prior's custom autograd functions and data-dependent shapes break it).

    python benchmarks/compile_mlp.py --threads 2                   # Jura's 359 rows, and 16,384
    python benchmarks/compile_mlp.py --device cuda --rows 359,16384,131072
"""

from __future__ import annotations

import os
import argparse
import platform
import time

import numpy as np
import torch

from geogpvae.datasets.synthetic import make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine


def default_networks(device: str) -> tuple[torch.nn.Module, torch.nn.Module, int]:
    """The encoder, decoder and encoder input width of a default model for 3 variables at 359 sites."""
    pts = np.random.default_rng(0).uniform(0, 5, size=(359, 2))
    field = make_field(pts, n_vars=3, n_latent=2, lengthscale=1.0, missing=0.2, rng=0)
    eng = GPVAEEngine(GPVAEConfig(neighbours=10, beta=1.0, calibrate=False, epochs=2, device=device), progress=False)
    eng.fit(pts, field.values)
    model = eng.model.train()
    return model.encoder, model.decoder, model.encoder[0].in_features


def time_pass(encoder, decoder, inputs: torch.Tensor, repeats: int) -> float:
    """Median seconds of one forward and backward pass."""
    def one():
        out = encoder(inputs)
        mean, raw = out.chunk(2, dim=-1)
        z = mean + torch.nn.functional.softplus(raw).sqrt() * torch.randn_like(mean)
        decoder(z).square().mean().backward()
        if inputs.device.type == "cuda":
            torch.cuda.synchronize()

    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        one()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="359,16384", help="comma-separated numbers of locations")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU"
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, {gpu}, torch {torch.__version__}")
    encoder, decoder, width = default_networks(args.device)
    for rows in (int(v) for v in args.rows.split(",")):
        inputs = torch.randn(rows, width, device=device)
        eager = time_pass(encoder, decoder, inputs, args.repeats)
        torch._dynamo.reset()
        enc_c, dec_c = torch.compile(encoder), torch.compile(decoder)
        t = time.perf_counter()
        time_pass(enc_c, dec_c, inputs, 1)
        first = time.perf_counter() - t
        compiled = time_pass(enc_c, dec_c, inputs, args.repeats)
        print(f"{rows:>7} rows: eager {1e3 * eager:.3f} ms, compiled {1e3 * compiled:.3f} ms "
              f"(x{eager / compiled:.2f}); first compiled call {first:.1f} s")


if __name__ == "__main__":
    main()
