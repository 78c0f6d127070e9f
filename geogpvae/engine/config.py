"""Options of the GPVAE engines, with defaults that work without tuning.

One flat, JSON-serialisable dataclass: it is stored inside saved models and checkpoints, and
the command line reads it from TOML files. ``None`` means "choose from the data" (see
:meth:`GPVAEConfig.resolve`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError, TrainingWarning, warn_caller

_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+|mps)$")

__all__ = ["GPVAEConfig", "warn_short_epochs", "ENGINES", "PREDICT_MODES", "FULL_BATCH", "STEP_BUDGET", "MAX_STEPS", "MIN_EPOCHS",
           "MIN_EPOCHS_UP_TO", "SHORT_EPOCHS_SHARE"]

ENGINES = ("spa", "hpa")
PREDICT_MODES = ("auto", "encoder", "neighbours", "combined")
#: What the beta candidates' check NLL judges (engine/selection.py): ``"auto"`` (the variances'
#: shape only for variables whose gaps cluster), ``"nll"`` (always), ``"mean"`` (never); the
#: option ``extra["selection_score"]``.
SELECTION_SCORES = ("auto", "nll", "mean")
BATCHINGS = ("auto", "random", "spatial")
SCHEDULES = ("cosine", "constant")
DTYPES = ("float32", "float64")
FULL_BATCH = 1024  # fields up to this many locations train on full batches by default
STEP_BUDGET = 1000  # optimiser steps of the default training budget
MAX_STEPS = 4000  # the most steps the stopping rule may take
#: Mini-batch fits of up to ``MIN_EPOCHS_UP_TO`` locations train at least ``MIN_EPOCHS`` epochs
#: by default, or three times the step budget's epochs where that is fewer: the step budget
#: alone gives a field of 17,000 locations 59 epochs, far from converged on smooth fields
#: (rule 8, docs/benchmarks.md); larger fields keep the step budget (and its time).
MIN_EPOCHS = 120
MIN_EPOCHS_UP_TO = 50_000
#: An explicit ``epochs`` below this share of the default budget's is warned about
#: (:meth:`GPVAEConfig.short_of_default`): on the tuning fields of rule 8, 59 epochs where 120
#: were due left the fills 20-30 % worse in RMSE. The share itself was not tuned.
SHORT_EPOCHS_SHARE = 0.5
#: Keys of ``extra``: settings for tuning runs and experiments, each read where it is used.
EXTRA_OPTIONS = {
    "chunk": "run length of compact mini-batches (config.py)",
    "clustered_stretches": "neighbour stretches of calibration where gaps cluster (engine/calibration.py)",
    "context_hiding": "'auto', true or false (engine/training.py)",
    "context_hiding_share": "share of hidden values taken out of the context (engine/training.py)",
    "deep_gaps": "false: no latent source chosen apart for locations deep in clustered gaps (engine/calibration.py)",
    "holdout": "'random': held-out values at random even where gaps cluster (engine/holdout.py)",
    "kl_factors": "the beta candidates of beta='auto' (engine/selection.py)",
    "latent_cap": "false: away from the anchors the neighbours' conditional goes to the GP prior, as before rule 9 (engine/predict.py)",
    "lengthscale_rank": "rank of the neighbour whose median distance starts the lengthscale (default: neighbours; engine/starts.py)",
    "lengthscale_spread": "true: the latent channels start from the H-th to the nearest neighbour's distance (engine/starts.py)",
    "memorisation": "'auto' (whole-field fits), true or false: calibrated variances widened by the never-trained over trained z-scores of the beta candidate (of the fitted model with the stopping rule; engine/memorisation.py)",
    "metric": "'auto' or 'fixed': neighbours re-chosen after a warm-up or not (engine/metric.py)",
    "metric_min_ratio": "engine/metric.py",
    "metric_rounds": "engine/metric.py",
    "metric_steps": "engine/metric.py",
    "noise_lr": "learning-rate multiple of the noise variances (engine/training.py)",
    "noise_rule": "engine/calibration.py",
    "nugget_bounds": "engine/nugget.py",
    "selection_holdout": "share of each variable's observed values held out by beta='auto' on whole-field fits (engine/selection.py)",
    "selection_score": "'auto', 'nll' or 'mean' (engine/selection.py)",
    "selection_share": "share of the budget each beta candidate trains (engine/selection.py)",
    "stop_ceiling": "the stopping rule's most epochs as a multiple of the default budget's (instead of MAX_STEPS steps; config.py)",
    "stop_rule": "settings of the stopping rule (engine/stopping.py)",
    "stretches": "neighbour stretches of calibration (engine/calibration.py)",
}


@dataclass
class GPVAEConfig:
    """Every option of a GPVAE model and its training.

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
        Neighbourhood sizes whose observed values the encoder sees, besides the location's own
        values: for each size k, the mean of each variable's observed values among the k
        nearest locations and the fraction observed. ``(8, 32)`` gives a near and a wider ring.
        0 gives the paper's encoder, which sees the location alone.
    kernel : str or gpytorch.kernels.Kernel
        Covariance family of the latent GPs, one of ``rbf, matern12, matern32, matern52, cauchy``,
        or any stationary gpytorch kernel instance (for example
        ``ScaleKernel(MaternKernel(nu=1.5, active_dims=[0, 1]) * PeriodicKernel(active_dims=[2]))``
        over space and time): each latent channel then trains its own copy, starting from the
        instance's hyperparameters (``lengthscale`` and ``outputscale`` apply to the built-ins
        only; see :mod:`geogpvae.gp.user_kernels`).
    lengthscale : float or None
        Initial lengthscale, in coordinate units. ``None``: the median distance from a point to
        its H-th nearest neighbour.
    outputscale : float
        Initial prior variance of every latent channel.
    learn_kernel : bool
        Train the kernel hyperparameters (else they stay at their initial values).
    noise : float or None
        Initial variance of the Gaussian likelihood of every variable, in standardised units.
        ``None``: each variable's empirical nugget (its semivariance extrapolated to distance
        0 from nearest-neighbour pairs, between 0.01 and 0.5; see
        :mod:`geogpvae.engine.nugget`). The variance learns slowly and stays near its start,
        and a start far above the values' own noise makes the raw predictive too wide (a
        smooth synthetic field: 95% intervals covering 0.997 from a start of 0.1).
    learn_noise : bool
        Train the likelihood variances (one per variable).
    beta : float, "auto" or None
        Weight of the KL term. ``"auto"`` (default): chosen for the field being fitted from
        held-out observed values between 1 and 0.2 times the base weight, ranked by their
        predictive means where values are missing at random and by the whole predictive where
        gaps cluster (see :mod:`geogpvae.engine.selection`; a fit then costs about 1.35 times
        one with a fixed weight, 1.2 times on fields small enough for whole-field steps;
        fields with fewer than 20 observed values per variable keep the base weight).
        ``None``: the base weight, 1 for SPA; for HPA, whose estimator (paper eq. 8) weighs
        one neighbourhood KL against N likelihood terms, ``N / H``, which puts the prior on
        the same per-location footing as SPA. A number: that weight.
    jitter : float
        Nugget added to the prior covariance, relative to the outputscale.
    ordering : {"auto", "random", "maxmin", "sorted", "none"}
        Ordering of the points for SPA's Vecchia factorisation. ``"auto"``: ``"sorted"``
        (coordinate order) when the locations lie on a regular lattice, where it makes the
        conditioning geometries repeat so that each is factorised once per mini-batch (SPE10:
        2.2x faster per epoch, same accuracy), else ``"random"``.
    mask_rate : float
        During training, the fraction of observed values hidden from the encoder (they still
        count in the likelihood). It teaches the encoder to infer missing variables and keeps
        the objective a valid ELBO.
    hidden_variance : bool or "auto"
        Estimate in training, from the values hidden from the encoder (``mask_rate``), the
        variance a value the model did not see needs on top of the decoded latent spread: per
        variable, and per pattern of the other variables seen at the location (a hidden
        permeability with its twin channel seen is nearly known; with nothing seen it is
        not). The likelihood variance cannot serve there: it is learnt mostly from values the
        encoder saw, so it measures how well values are *reconstructed*, not predicted (see
        :meth:`GPVAE.update_hidden_moments
        <geogpvae.engine.model.GPVAE.update_hidden_moments>`). Needs ``mask_rate > 0``.
        ``"auto"`` (the default): calibration scores the likelihood variance (the paper's
        predictive), the per-variable and the per-pattern estimate, and the likelihood's
        predictive with its whole variance scaled by the ratio the hidden values showed in
        training (:attr:`GPVAE.hidden_ratio <geogpvae.engine.model.GPVAE.hidden_ratio>`), on
        its held-out values,
        and for each variable and regime (targets with and without observed values of their
        own), among the variances that predict its held-out values as well as the best one
        (none beaten by more than two paired standard errors), keeps the likelihood variance
        while its calibration factor lies within 0.5-2, else the one whose factor is nearest
        1; the fit itself is the one False gives (up to float round-off). On the SPE10 tuning
        mask: NLL 0.439 -> 0.176 at the same RMSE, raw 95% coverage 0.50 / 0.94 / 0.94 / 0.66
        -> 0.94 / 0.97 / 0.97 / 0.96 (log kz takes the scaled variance, factor 6.65 -> 0.69);
        Jura, the synthetic fields, the outage fields, the station networks and the kriging
        task: the same NLL within 0.003, calibration factors nearer 1 (docs/benchmarks.md).
        True: the per-variable
        or per-pattern estimate, whichever calibration prefers (the per-variable one without
        calibration). False: the paper's predictive.
    epochs : int or None
        Passes over the data. ``None``: a budget of optimiser steps (see
        :meth:`step_budget`: 1000 full-batch steps on fields of up to 1024 locations; 4000
        steps in batches of 256, and in proportion fewer with larger batches but at least
        1000, on larger ones; at least 5 epochs; in mini-batches on fields of up to
        ``MIN_EPOCHS_UP_TO`` (50,000) locations at least ``MIN_EPOCHS`` (120) epochs, or three
        times the step budget's where that is fewer). With ``holdout > 0``, training goes on
        for up to ``MAX_STEPS`` (4000) steps but stops once the fit of held-out observed
        values stops improving, and keeps the weights that fitted them best (see
        :mod:`geogpvae.engine.stopping`). An explicit number trains exactly that many
        epochs; under half of the default budget's (:meth:`short_of_default`) the fit raises a
        :class:`~geogpvae.errors.TrainingWarning`. The budgets were chosen on tuning splits that are never scored (Jura:
        cross-validation inside the training sites; SPE10: a second mask; a synthetic 48 x 48
        field): see docs/benchmarks.md.
    batch_size : int or None
        Locations per mini-batch (capped at N). ``None``: the whole field in one batch up to
        ``FULL_BATCH`` (1024) locations; larger fields take about N/32 (a power of two
        between 256 and 4096), so an epoch is about 32 steps and each step is large enough
        to amortise the per-step overhead and to share neighbours between nearby locations.
    holdout : float
        The share of each variable's observed values (at most 20,000 values in all) kept out
        of training to decide when to stop (with ``epochs=None``); 0, the default, trains the
        step budget on every observed value. On Jura stopping at the best held-out fit
        stopped too early (tuning split RMSE 0.657 against 0.646 for the fixed budget); on
        mini-batch fits, allowed twice the budget (``extra={"stop_ceiling": 2}``), it helped
        the outage tuning fields (0.172 -> 0.160) and cost fields with gaps that stay in place
        (0.490 -> 0.520), which cannot spare the held-out values (rule 21, docs/benchmarks.md).
    lr : float or None
        Adam learning rate. ``None``: 0.01 for full-batch training (whole-field gradients
        are exact, so larger steps are safe: on the Jura tuning split 0.01 gave RMSE 0.661
        against 0.667 for 0.003 with the stopping rule, in 40% of the steps), else 0.003.
    kernel_lr : float
        Learning rate of the kernel hyperparameters, as a multiple of ``lr``: the latent GP's
        lengthscales drift slowly under the noisy gradients of mini-batch training. On the
        Jura tuning split (cross-validation inside the training sites, ``beta="auto"``) 10
        gave RMSE 0.658 / NLL 0.989, against 0.650 / 1.012 for 1, 0.651 / 1.032 for 3 and
        0.671 / 1.004 for 30: no setting is better on both, so 10 stays.
    lr_schedule : {"cosine", "constant"}
        ``"cosine"`` (the default): a short linear warm-up (2% of the steps), then a cosine
        decay to 5% of ``lr`` at the last step; ``"constant"``: ``lr`` throughout. Chosen on
        the tuning splits, never the scored values (with ``beta="auto"``): Jura
        cross-validation RMSE 0.634 / NLL 0.959 against 0.658 / 0.989 for constant, the SPE10
        second mask 0.442 / 0.441 against 0.443 / 0.443, the synthetic 48 x 48 fields
        0.063 / -1.339 against 0.067 / -1.284 (see docs/benchmarks.md).
    weight_average : float
        Decay of an exponential moving average of the weights, updated after every optimiser
        step and used as the final model (0 disables it). Averaging over the last few hundred
        steps removes most of the step-to-step noise of stochastic training.
    batching : {"auto", "random", "spatial"}
        ``"spatial"`` draws mini-batches as groups of nearby locations, so that neighbours are
        shared and encoded once: faster per epoch on large fields. ``"auto"``: ``"spatial"``
        on a regular lattice and for every fit trained in mini-batches (on the station
        network's tuning split as accurate and 22 % faster than ``"random"``), else
        ``"random"`` (whole-field steps on scattered locations).
    train_samples : int
        Monte Carlo samples of z per location in the training likelihood.
    samples : int
        Monte Carlo samples of z per location at prediction.
    predict_mode : {"auto", "encoder", "neighbours", "combined"}
        Latent posterior at prediction for locations with observations: the encoder's, the GP
        conditional on the H nearest observed locations (paper section 3.3), or their
        combination. Locations without any observation use the neighbours, except under ``"auto"``
        (which may also pick the encoder or the combination there). ``"auto"``
        scores every source on held-out values during calibration and keeps the best for each
        (``"combined"`` when ``calibrate=False``); for locations without any observation that
        includes the neighbours' conditional with the latent lengthscales stretched 2 or 4
        times or shrunk to a half or a quarter (``"neighbours*2"``, ``"neighbours*0.5"``...;
        built-in kernels; where some variable's gaps cluster, stretches of 2 to 16 with the
        learnt kernel's variance), which often predicts there better than the lengthscales
        the ELBO learns.
    calibrate : bool
        After training, rescale each variable's predictive variance so that values hidden from
        the model are covered at their nominal rate: five rounds hide every observed value
        once, plus every value of a twentieth of the locations each round (where some
        variable's gaps cluster, each round hides a tenth in gaps shaped like the missing ones).
    seed : int
        Seed of every random choice (ordering, batches, initial weights, Monte Carlo).
    members : int
        Models trained on the field, member ``k`` with seed ``seed + k``, whose predictive
        distributions are mixed value by value (see :mod:`geogpvae.engine.members`): the
        mean of their means, the mean of their variances plus the spread of their means.
        1 (the default): one model. 2 cost twice as much; on tuning splits they lowered the
        RMSE and NLL on the small surveys and many-variable fields and not on the 48 x 48
        synthetic fields or the station network's 12,000 locations (docs/benchmarks.md, "Two
        models from two seeds"). A checkpoint holds every member trained and the one in
        training.
    device : str
        ``"auto"`` (CUDA when available, except for fields small enough that every training
        step takes the whole field, which are faster on the CPU), ``"cpu"``, ``"cuda"`` or
        ``"cuda:N"``.
    threads : int or None
        CPU threads for torch. ``None`` chooses from what the process may use: a count set
        with :func:`torch.set_num_threads`, ``OMP_NUM_THREADS``, else the CPU affinity mask
        capped by ``SLURM_CPUS_PER_TASK`` (see :mod:`geogpvae.engine.threads`).
    dtype : {"float32", "float64"}
        Floating-point type of the model.
    neighbour_backend : {"auto", "kdtree", "faiss"}
        Nearest-neighbour search backend.
    extra : dict
        Settings for tuning runs and experiments (keys in :data:`EXTRA_OPTIONS`; an unknown
        key is refused). Empty by default.
    """

    engine: str = "spa"
    neighbours: int = 20
    latent_dim: int | None = None
    encoder_hidden: tuple[int, ...] = (128, 128)
    decoder_hidden: tuple[int, ...] = (128, 128)
    context: int | tuple[int, ...] = 8
    kernel: Any = "matern32"
    lengthscale: float | None = None
    outputscale: float = 1.0
    learn_kernel: bool = True
    noise: float | None = None
    learn_noise: bool = True
    beta: float | str | None = "auto"
    jitter: float = 1e-4
    ordering: str = "auto"
    mask_rate: float = 0.25
    hidden_variance: bool | str = "auto"
    epochs: int | None = None
    batch_size: int | None = None
    holdout: float = 0.0
    lr: float | None = None
    kernel_lr: float = 10.0
    lr_schedule: str = "cosine"
    weight_average: float = 0.995
    batching: str = "auto"
    train_samples: int = 1
    samples: int = 64
    predict_mode: str = "auto"
    calibrate: bool = True
    seed: int = 0
    members: int = 1
    device: str = "auto"
    threads: int | None = None
    dtype: str = "float32"
    neighbour_backend: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

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
        if isinstance(self.members, int) and self.seed + self.members > 2**63:  # member k: seed + k
            raise ValueError(f"seed + members - 1 must be below 2**63, got seed {self.seed} and members {self.members}")
        if self.threads is not None and (
            not isinstance(self.threads, int) or isinstance(self.threads, bool) or self.threads < 1
        ):
            raise ValueError(f"threads must be a positive integer or None, got {self.threads!r}")

    def _check_extra(self) -> None:
        if not isinstance(self.extra, dict):
            raise TypeError(f"extra must be a table of options (a dict), got {self.extra!r}; "
                            "on the command line e.g. --option extra.selection_score=mean")
        unknown = sorted(set(self.extra) - set(EXTRA_OPTIONS))
        if unknown:
            import difflib

            close = [m for k in unknown for m in difflib.get_close_matches(str(k), EXTRA_OPTIONS, n=1, cutoff=0.8)]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"unknown extra option(s) {', '.join(map(str, unknown))}{hint}; "
                             f"known: {', '.join(EXTRA_OPTIONS)}")
        if "selection_score" in self.extra:  # an option of beta="auto" (engine/selection.py)
            score = self.extra["selection_score"]
            if score not in SELECTION_SCORES:
                raise ValueError(f"unknown selection_score {score!r}; choose one of {', '.join(SELECTION_SCORES)}")
        if self.extra.get("context_hiding", "auto") not in ("auto", True, False):  # engine/training.py
            raise ValueError(f"context_hiding must be 'auto', true or false, got {self.extra['context_hiding']!r}")
        share = self.extra.get("context_hiding_share", 0.5)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise ValueError(f"context_hiding_share must be a number in (0, 1], got {share!r}")

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
        choice("batching", BATCHINGS)
        choice("predict_mode", PREDICT_MODES)
        choice("dtype", DTYPES)
        choice("lr_schedule", SCHEDULES)
        choice("neighbour_backend", BACKENDS)
        self._check_extra()
        if isinstance(self.context, tuple) and (not self.context or min(self.context) < 1):
            raise ValueError(f"context sizes must be positive integers, got {self.context!r}")
        ints = {"neighbours": 0, "train_samples": 1, "samples": 1, "members": 1}
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
        positive = {"outputscale": self.outputscale, "kernel_lr": self.kernel_lr}
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
        if not (0.0 <= self.jitter < 1.0):
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter!r}")
        if not (0.0 <= self.weight_average < 1.0):
            raise ValueError(f"weight_average must be in [0, 1), got {self.weight_average!r}")
        if not (0.0 <= self.holdout < 0.5):
            raise ValueError(f"holdout must be in [0, 0.5), got {self.holdout!r}")
        if self.hidden_variance not in (True, False, "auto"):
            raise ValueError(f'hidden_variance must be True, False or "auto", got {self.hidden_variance!r}')
        if not (0.0 <= self.mask_rate < 1.0):
            raise ValueError(f"mask_rate must be in [0, 1), got {self.mask_rate!r}")
        if any(w < 1 for w in self.encoder_hidden + self.decoder_hidden):
            raise ValueError("hidden layer widths must be positive integers")

    def check_locations(self, n_points: int) -> None:
        """Raise :class:`~geogpvae.errors.InputError` unless there are at least H + 1 locations.

        The one place of this rule: the imputer checks it before training (and so the
        command line), the engine again on plain arrays.

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
        return int(self.extra.get("chunk", max(32, batch_size // 8)))

    def step_budget(self, n_points: int) -> int:
        """Optimiser steps of the default budget for ``n_points`` locations.

        ``STEP_BUDGET`` (1000) full-batch steps; with mini-batches, as many steps as about a
        million location visits in batches of 256 would take (4000), in proportion fewer for
        larger batches, and never fewer than ``STEP_BUDGET``.
        """
        batch = self.batch_for(n_points)
        if batch >= n_points:
            return STEP_BUDGET
        return max(STEP_BUDGET, math.ceil(4 * STEP_BUDGET * 256 / batch))

    def n_epochs(self, n_points: int) -> int:
        """Epochs run for ``n_points`` locations (at most, with the stopping rule: ``MAX_STEPS``
        steps, or ``extra["stop_ceiling"]`` times the default budget's epochs)."""
        if self.epochs is not None:
            return self.epochs
        if self.stops_early() and "stop_ceiling" in self.extra:
            return math.ceil(float(self.extra["stop_ceiling"]) * self.replace(holdout=0.0).n_epochs(n_points))
        steps_per_epoch = math.ceil(n_points / self.batch_for(n_points))
        budget = MAX_STEPS if self.stops_early() else self.step_budget(n_points)
        epochs = int(min(budget, max(5, math.ceil(budget / steps_per_epoch))))
        if not self.stops_early() and n_points <= MIN_EPOCHS_UP_TO:  # (whole-field fits: 1000 already)
            epochs = max(epochs, min(MIN_EPOCHS, 3 * epochs))
        return epochs

    def short_of_default(self, n_points: int) -> int | None:
        """The default budget's epochs when an explicit ``epochs`` is under ``SHORT_EPOCHS_SHARE``
        of them (the step budget's, at the same batch size), else None."""
        if self.epochs is None:
            return None
        default = self.replace(epochs=None, holdout=0.0).n_epochs(n_points)
        return default if self.epochs < SHORT_EPOCHS_SHARE * default else None

    def stops_early(self) -> bool:
        """Whether training ends by the held-out stopping rule (``epochs=None``, ``holdout > 0``)."""
        return self.epochs is None and self.holdout > 0

    def stop_rule(self, n_points: int) -> dict[str, float]:
        """Settings of :class:`geogpvae.engine.stopping.StopRule` for ``n_points`` locations."""
        steps_per_epoch = math.ceil(n_points / self.batch_for(n_points))
        rule = {"every": max(20, steps_per_epoch), "patience": 200, "growth": 0.5, "min_steps": 200}
        rule.update(self.extra.get("stop_rule", {}))
        return rule

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
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; known options: {', '.join(sorted(known))}")
        kernel = values.get("kernel")
        if isinstance(kernel, dict) and set(kernel) == {"gpytorch"}:
            from ..gp.user_kernels import kernel_from_spec

            values = {**values, "kernel": kernel_from_spec(kernel["gpytorch"])}
        return cls(**values)

    def replace(self, **changes: Any) -> GPVAEConfig:
        """A copy with some options changed (validated)."""
        return GPVAEConfig.from_dict({**self.to_dict(), "kernel": self.kernel, **changes})

    @property
    def kernel_name(self) -> str:
        """The kernel as a short text: its name, or the gpytorch classes it is made of."""
        if isinstance(self.kernel, str):
            return self.kernel
        return _spec_text(_kernel_spec(self.kernel))


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
