"""Options of the GPVAE engines: one flat, JSON-serialisable dataclass, stored in saved models
and read from TOML by the command line. ``None`` means "choose from the data"."""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, TrainingWarning, warn_caller

_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+|mps)$")

__all__ = ["GPVAEConfig", "warn_short_epochs", "ENGINES", "PREDICT_MODES", "FULL_BATCH", "GPU_MIN_BATCH", "STEP_BUDGET", "MIN_EPOCHS",
           "MIN_EPOCHS_UP_TO", "SHORT_EPOCHS_SHARE", "RETIRED_OPTIONS",
           "without_retired"]

ENGINES = ("spa", "hpa")
PREDICT_MODES = ("auto", "encoder", "neighbours", "combined")
DTYPES = ("float32", "float64")
FULL_BATCH = 1024  # fields up to this many locations train on full batches by default
GPU_MIN_BATCH = 1024  # device="auto": fits in smaller mini-batches (or whole-field ones) run on the CPU
STEP_BUDGET = 1000  # optimiser steps of the default training budget
#: Mini-batch fits of up to ``MIN_EPOCHS_UP_TO`` locations train at least ``MIN_EPOCHS`` epochs
MIN_EPOCHS = 120
MIN_EPOCHS_UP_TO = 50_000
#: An explicit ``epochs`` below this share of the default budget's is warned about
SHORT_EPOCHS_SHARE = 0.5
#: Options of earlier versions and the value every model now uses (saved at it, a file loads)
RETIRED_OPTIONS = {
    "outputscale": 1.0, "learn_kernel": True, "learn_noise": True, "jitter": 1e-4,
    "hidden_variance": "auto", "holdout": 0.0, "kernel_lr": 10.0, "lr_schedule": "cosine",
    "weight_average": 0.995, "batching": "auto", "train_samples": 1, "members": 1, "extra": {},
}


@dataclass
class GPVAEConfig:
    """Every option of a GPVAE model and its training.

    The reasons behind each default, with the figures that chose them, are on the
    design-decisions page of the documentation.

    Parameters
    ----------
    engine : {"spa", "hpa"}
        Sparse precision (Vecchia) or hierarchical prior approximation of the latent GP.
    neighbours : int
        H: the size of each conditioning set (SPA) or neighbourhood (HPA). 0 gives a plain VAE.
    latent_dim : int or None
        L, the number of latent GP channels. ``None``: ``max(2, K - 1)`` for K variables.
    encoder_hidden, decoder_hidden : tuple of int
        Widths of the hidden layers of the encoder and decoder MLPs (ReLU).
    context : int or tuple of int
        Neighbourhood sizes k whose summary the encoder also sees: per variable, the mean of
        the observed values among the k nearest locations and the fraction observed. 0 gives
        the paper's encoder, which sees the location alone.
    kernel : str or gpytorch.kernels.Kernel
        Covariance family of the latent GPs, one of ``rbf, matern12, matern32, matern52, cauchy``,
        or a stationary gpytorch kernel instance, copied for each latent channel
        (:mod:`geogpvae.gp.user_kernels`).
    lengthscale : float or None
        Initial lengthscale, in coordinate units. ``None``: the median distance from a point to
        its H-th nearest neighbour.
    noise : float or None
        Initial likelihood variance of every variable, in standardised units. ``None``: each
        variable's empirical nugget (:mod:`geogpvae.engine.nugget`).
    beta : float, "auto" or None
        Weight of the KL term. ``"auto"``: chosen on held-out observed values among 1 to 0.2
        times the base weight (:mod:`geogpvae.engine.selection`). ``None``: the base weight,
        1 for SPA and ``N / H`` for HPA (paper eq. 8). A number: that weight.
    ordering : {"auto", "random", "maxmin", "sorted", "none"}
        Point ordering of SPA's Vecchia factorisation. ``"auto"``: ``"sorted"`` on a regular
        lattice (repeated geometries are factorised once), else ``"random"``.
    mask_rate : float
        Fraction of observed values hidden from the encoder in training (they still count in
        the likelihood): it teaches the encoder to infer missing variables and measures the
        variance an unseen value needs. 0 gives the paper's predictive.
    epochs : int or None
        Passes over the data. ``None``: a budget of optimiser steps (:meth:`n_epochs`). Under
        half of the default budget's, a :class:`~geogpvae.errors.TrainingWarning`. A number
        also bounds the work around it: the model returned trains exactly ``epochs``; with
        ``beta="auto"`` the other KL candidate trains ``engine.budget.selection_epochs`` of
        them (a fifth on whole-field fits, 35 % with mini-batches, rounded up; at least 3 where
        that leaves an epoch after them), and the learnt
        metric's warm-up rounds train at most ``epochs`` in all.
    batch_size : int or None
        Locations per mini-batch. ``None``: the whole field up to ``FULL_BATCH`` (1024)
        locations, else about N/32 (a power of two between 256 and 4096).
    lr : float or None
        Adam learning rate (warm-up, cosine decay). ``None``: 0.01 full-batch, else 0.003.
    samples : int
        Monte Carlo samples of z per location at prediction.
    predict_mode : {"auto", "encoder", "neighbours", "combined"}
        Latent posterior at locations with observations: the encoder's, the GP conditional on
        the H nearest observed locations (paper section 3.3), or both combined; locations
        without any use the neighbours. ``"auto"``: calibration scores every source (and
        stretched neighbours, ``"neighbours*2"``...) on held-out values and keeps the best per
        regime (``"combined"`` when ``calibrate=False``).
    calibrate : bool
        After training, rescale each variable's predictive variance so that values hidden from
        the model are covered at their nominal rate (:mod:`geogpvae.engine.calibration`).
    seed : int
        Seed of every random choice (ordering, batches, initial weights, Monte Carlo).
    device : str
        ``"auto"`` (CUDA when available, but whole-field fits on the CPU), ``"cpu"``,
        ``"cuda"`` or ``"cuda:N"``.
    threads : int or None
        CPU threads for torch. ``None``: from the process's allowance
        (:mod:`geogpvae.engine.threads`).
    dtype : {"float32", "float64"}
        Floating-point type of the model.
    neighbour_backend : {"auto", "kdtree", "faiss"}
        Nearest-neighbour search backend.
    """

    engine: str = "spa"
    neighbours: int = 20
    latent_dim: int | None = None
    encoder_hidden: tuple[int, ...] = (128, 128)
    decoder_hidden: tuple[int, ...] = (128, 128)
    context: int | tuple[int, ...] = 8
    kernel: Any = "matern32"
    lengthscale: float | None = None
    noise: float | None = None
    beta: float | str | None = "auto"
    ordering: str = "auto"
    mask_rate: float = 0.25
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    samples: int = 64
    predict_mode: str = "auto"
    calibrate: bool = True
    seed: int = 0
    device: str = "auto"
    threads: int | None = None
    dtype: str = "float32"
    neighbour_backend: str = "auto"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # NumPy scalars (e.g. seeds from np.arange) as Python numbers
            value = getattr(self, f.name)
            if isinstance(value, np.generic) and isinstance(value, (np.integer, np.floating, np.bool_)):
                setattr(self, f.name, value.item())
        if not isinstance(self.context, (int, bool)):
            self.context = _integers(self.context, "context", "an integer or a list of integers, e.g. 8 or [8, 16]")
        self.encoder_hidden = _integers(self.encoder_hidden, "encoder_hidden", "a list of integers, e.g. [128, 128]")
        self.decoder_hidden = _integers(self.decoder_hidden, "decoder_hidden", "a list of integers, e.g. [128, 128]")
        self.validate()

    # ------------------------------------------------------------------ checks
    def _check_epochs_and_device(self) -> None:
        if self.epochs is not None and (
            not isinstance(self.epochs, int) or isinstance(self.epochs, bool) or self.epochs < 1
        ):
            raise ValueError(
                f"epochs must be a positive integer or None (the default), got {self.epochs!r}"
                + ("; epochs=0 would return an untrained model" if self.epochs == 0 else "")
            )
        if not isinstance(self.device, str) or not _DEVICE.match(self.device):
            raise ValueError(
                f"unknown device {self.device!r}; use 'auto' (CUDA when available), 'cpu', "
                "'cuda', 'cuda:N' or 'mps'"
            )

    def _check_run_settings(self) -> None:
        """epochs, seed, threads and device."""
        self._check_epochs_and_device()
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.seed >= 2**63:  # seeds are offset and combined in 64-bit generators
            raise ValueError(f"seed must be below 2**63, got {self.seed}")
        if self.threads is not None and (
            not isinstance(self.threads, int) or isinstance(self.threads, bool) or self.threads < 1
        ):
            raise ValueError(f"threads must be a positive integer or None, got {self.threads!r}")

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first option that is out of range."""

        from ..gp.names import BACKENDS, KERNELS, ORDERINGS

        def choice(name: str, allowed: tuple[str, ...]) -> None:
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(allowed)}")

        choice("engine", ENGINES)
        if isinstance(self.kernel, str):  # a name: no torch needed to check it
            choice("kernel", KERNELS)
        else:
            from ..gp.user_kernels import check_user_kernel, is_gpytorch_kernel

            if not is_gpytorch_kernel(self.kernel):
                choice("kernel", KERNELS)  # refused, naming the choices
            check_user_kernel(self.kernel)
        choice("ordering", ("auto", *ORDERINGS))
        choice("predict_mode", PREDICT_MODES)
        choice("dtype", DTYPES)
        choice("neighbour_backend", BACKENDS)
        if isinstance(self.context, tuple) and (not self.context or min(self.context) < 1):
            raise ValueError(f"context sizes must be positive integers, got {self.context!r}")
        ints = {"neighbours": 0, "samples": 1}
        if self.batch_size is not None:
            ints["batch_size"] = 1
        if not isinstance(self.context, tuple):
            ints["context"] = 0
        for name, low in ints.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.latent_dim is not None and (not isinstance(self.latent_dim, int) or self.latent_dim < 1):
            raise ValueError(f"latent_dim must be a positive integer or None, got {self.latent_dim!r}")
        self._check_run_settings()
        positive = {}
        if self.noise is not None:
            positive["noise"] = self.noise
        if self.lr is not None:
            positive["lr"] = self.lr
        if self.lengthscale is not None:
            positive["lengthscale"] = self.lengthscale
        if isinstance(self.beta, str) and self.beta != "auto":
            raise ValueError(f'beta must be a positive number, "auto" or None, got {self.beta!r}')
        if self.beta is not None and self.beta != "auto":
            positive["beta"] = self.beta
        for name, value in positive.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not (0.0 <= self.mask_rate < 1.0):
            raise ValueError(f"mask_rate must be in [0, 1), got {self.mask_rate!r}")
        if any(w < 1 for w in self.encoder_hidden + self.decoder_hidden):
            raise ValueError("hidden layer widths must be positive integers")

    def check_locations(self, n_points: int) -> None:
        """Raise :class:`~geogpvae.errors.InputError` unless there are at least H + 1 locations.

        Parameters
        ----------
        n_points : int
            Locations inside the domain.
        """
        if n_points < self.neighbours + 1:
            raise InputError(
                f"{n_points} locations (inside the domain) are fewer than neighbours + 1 = "
                f"{self.neighbours + 1}; set neighbours (--neighbours) to {max(n_points - 1, 0)} "
                "or fewer"
            )

    # ------------------------------------------------------------------ derived values
    @property
    def context_scales(self) -> tuple[int, ...]:
        """The encoder's neighbourhood sizes (empty for the location-only encoder)."""
        if isinstance(self.context, tuple):
            return self.context
        return (self.context,) if self.context else ()

    def latent_size(self, n_vars: int) -> int:
        """L for ``n_vars`` variables."""
        return self.latent_dim if self.latent_dim is not None else max(2, n_vars - 1)

    def kl_weight(self, n_points: int, factor: float = 1.0) -> float:
        """The beta used for ``n_points`` locations: a number given, else ``factor`` times the
        base weight (1 for SPA, N/H for HPA; ``beta="auto"`` chooses the factor)."""
        if self.beta is not None and self.beta != "auto":
            return float(self.beta)
        if self.engine == "hpa":
            return factor * n_points / max(self.neighbours, 1)
        return float(factor)

    def batch_for(self, n_points: int) -> int:
        """Locations per mini-batch for ``n_points`` locations."""
        if self.batch_size is not None:
            return min(self.batch_size, n_points)
        if n_points <= FULL_BATCH:
            return n_points
        return int(min(4096, max(256, 2 ** int(math.log2(n_points / 32)))))

    def lr_for(self, n_points: int) -> float:
        """The learning rate used for ``n_points`` locations."""
        if self.lr is not None:
            return float(self.lr)
        return 1e-2 if self.batch_for(n_points) >= n_points else 3e-3

    def chunk_for(self, batch_size: int) -> int:
        """Run length of spatial mini-batches: consecutive locations of the spatial order."""
        return max(32, batch_size // 8)

    def step_budget(self, n_points: int) -> int:
        """Optimiser steps of the default budget: ``STEP_BUDGET`` full-batch, else about a million
        location visits' worth in batches of 256, fewer for larger batches, never under it."""
        batch = self.batch_for(n_points)
        if batch >= n_points:
            return STEP_BUDGET
        return max(STEP_BUDGET, math.ceil(4 * STEP_BUDGET * 256 / batch))

    def n_epochs(self, n_points: int) -> int:
        """Epochs run: ``epochs``, else the step budget's (at least 5; mini-batch fits of up to
        ``MIN_EPOCHS_UP_TO`` locations at least ``MIN_EPOCHS`` or 3x the budget's epochs)."""
        if self.epochs is not None:
            return self.epochs
        steps_per_epoch = math.ceil(n_points / self.batch_for(n_points))
        budget = self.step_budget(n_points)
        epochs = int(min(budget, max(5, math.ceil(budget / steps_per_epoch))))
        if n_points <= MIN_EPOCHS_UP_TO:  # (whole-field fits: 1000 already)
            epochs = max(epochs, min(MIN_EPOCHS, 3 * epochs))
        return epochs

    def short_of_default(self, n_points: int) -> int | None:
        """The default budget's epochs when an explicit ``epochs`` is under ``SHORT_EPOCHS_SHARE``
        of them (the step budget's, at the same batch size), else None."""
        if self.epochs is None:
            return None
        default = self.replace(epochs=None).n_epochs(n_points)
        return default if self.epochs < SHORT_EPOCHS_SHARE * default else None

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dictionary (JSON- and TOML-friendly)."""
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "kernel"}
        out["kernel"] = self.kernel if isinstance(self.kernel, str) else {"gpytorch": _kernel_spec(self.kernel)}
        out["encoder_hidden"] = list(self.encoder_hidden)
        out["decoder_hidden"] = list(self.decoder_hidden)
        if isinstance(self.context, tuple):
            out["context"] = list(self.context)
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GPVAEConfig:
        """Build from a dictionary, rejecting unknown keys with a clear message."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = without_retired(values, known)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; known options: {', '.join(sorted(known))}")
        kernel = values.get("kernel")
        if isinstance(kernel, dict) and set(kernel) == {"gpytorch"}:
            from ..gp.user_kernels import kernel_from_spec

            values = {**values, "kernel": kernel_from_spec(kernel["gpytorch"])}
        return cls(**values)

    @classmethod
    def from_attributes(cls, obj: Any) -> GPVAEConfig:
        """Build from the attributes of ``obj`` named as the options (an estimator's parameters),
        validated."""
        return cls.from_dict({f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)})

    def replace(self, **changes: Any) -> GPVAEConfig:
        """A copy with some options changed (validated)."""
        return GPVAEConfig.from_dict({**self.to_dict(), "kernel": self.kernel, **changes})

    @property
    def kernel_name(self) -> str:
        """The kernel as a short text: its name, or the gpytorch classes it is made of."""
        if isinstance(self.kernel, str):
            return self.kernel
        return _spec_text(_kernel_spec(self.kernel))


def without_retired(values: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """``values`` less the retired options that hold the value every model now uses (saved
    models and checkpoints of earlier versions); a retired option set otherwise is refused."""
    out = dict(values)
    for name, fixed in RETIRED_OPTIONS.items():
        if name in out and name not in known:
            value = out.pop(name)
            if value != fixed and not (name == "extra" and not value):
                raise ValueError(f"the option {name} is no longer available (every model uses "
                                 f"{name}={fixed!r}), got {name}={value!r}")
    return out


def _integers(value: Any, name: str, form: str) -> tuple[int, ...]:
    """A list, tuple or 1-D integer array of integers as a tuple; anything else (a string, a
    number, floats) is a TypeError that shows the expected form."""
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
        value = value.tolist()
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)
    if not ok:
        raise TypeError(f"{name} must be {form} "
                        f"(on the command line --option {name}=[...]), got {value!r}")
    return tuple(int(v) for v in value)


def _kernel_spec(kernel: Any) -> dict[str, Any]:
    from ..gp.user_kernels import kernel_spec

    return kernel_spec(kernel)


def _spec_text(spec: dict[str, Any]) -> str:
    """``ScaleKernel(MaternKernel(nu=1.5) * PeriodicKernel)`` from a kernel description."""
    name = spec["class"]
    if "base" in spec:
        return f"{name}({_spec_text(spec['base'])})"
    if "kernels" in spec:
        join = " * " if name == "ProductKernel" else " + "
        return "(" + join.join(_spec_text(k) for k in spec["kernels"]) + ")"
    args = [f"{k}={v}" for k, v in spec.items() if k in ("nu", "active_dims")]
    return f"{name}({', '.join(args)})" if args else name


def warn_short_epochs(config: GPVAEConfig, n_points: int) -> None:
    """Warn when an explicit ``epochs`` is far under the default budget for ``n_points``."""
    default = config.short_of_default(n_points)
    if default is not None:
        warn_caller(f"epochs={config.epochs} is under half of the {default} epochs the default budget "
                    f"trains on {n_points} locations: the fills and their intervals may be far from "
                    "converged; leave epochs unset (None) for the default budget", TrainingWarning)
