"""The engine on plain arrays: NumPy in, NumPy out, no xarray.

:class:`GPVAEEngine` runs the pipeline standardise -> metric -> train (choosing beta) ->
calibrate, and predicts every variable with its standard deviation in the original units.
Its state is a dictionary of tensors and plain values (:mod:`geogpvae.engine.state`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import InputError, warn_caller
from .calibration import calibrate
from .config import GPU_MIN_BATCH, GPVAEConfig, warn_short_epochs
from .holdout import clustered_gaps, held_out
from .inputs import (centre, check_coordinates, check_standardised, constant_values, missing_code_warnings, real_values,
                     standardisation)
from .metric import learn_metric, saved_scale, uses_learnt_metric, warmup_epochs, warmup_rounds
from .model import GPVAE
from .nugget import nugget
from .posterior import Posterior, Prediction
from .progress import Progress
from .same_field import matching_rows
from .site_levels import SiteLevels, about_site_levels, with_levels
from .selection import KL_FACTORS, SELECTION_HOLDOUT, select_kl_factor, selection_epochs, selection_share
from .starts import start_lengthscale
from .state import (
    STATE_FORMAT,
    check_checkpoint,
    checkpoint_state,
    engine_state,
    saved_attributes,
    saved_config,
    selection_from,
    train_state_from,
    with_hidden_moments,
)
from .targets import Targets, checked_rows, rows_of, self_index_of
from .threads import configure_threads, one_at_a_time
from .data import CONTEXT_HIDING_SHARE, FieldData, context_index, context_radius, field_data, resolve_device, with_context_hiding
from .training import TrainState, distributed, train

__all__ = ["GPVAEEngine", "Prediction", "STATE_FORMAT", "build_model"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: the fewest observed values, all equal, that make a variable constant (filled, std 0)
MIN_CONSTANT_VALUES = 3

#: locations predicted at a time (a multiple of :mod:`geogpvae.engine.predict`'s chunks)
PREDICT_CHUNK = 65536


class GPVAEEngine:
    """Train a neighbour-driven GPVAE on one field and predict from it.

    Parameters
    ----------
    config : GPVAEConfig, optional
        All options; keyword arguments override single options.
    progress : bool or {"bar", "log", "none"}
        Progress display of training, calibration and prediction (see
        :mod:`geogpvae.engine.progress`).
    **options
        Any :class:`~geogpvae.engine.config.GPVAEConfig` field, e.g. ``engine="hpa"``.

    Examples
    --------
    >>> from geogpvae.datasets.synthetic import grid_points, make_field
    >>> field = make_field(grid_points((24, 24), 1 / 23), n_vars=3, missing=0.5)
    >>> engine = GPVAEEngine(epochs=5, progress=False).fit(field.points, field.values)
    >>> engine.predict().mean.shape
    (576, 3)
    """

    def __init__(self, config: GPVAEConfig | None = None, *, progress: bool | str = True, **options: Any) -> None:
        base = config or GPVAEConfig()
        self.config = base.replace(**options) if options else base
        self.progress = progress
        #: the CPU thread count in use and why (see :mod:`geogpvae.engine.threads`)
        self.threads_ = configure_threads(self.config.threads)
        self.model: GPVAE | None = None
        self.train_state: TrainState | None = None
        self.names: list[str] = []
        self.loc = self.scale = None
        #: each variable's value where every observed one is equal (filled with it, std 0), else NaN
        self.constant_: np.ndarray | None = None
        self.log = None
        self.lengthscale_: float | None = None
        self.calibration_: np.ndarray | None = None
        self.noise_start_: np.ndarray | None = None
        self.n_points_: int | None = None
        self.x_offset_: np.ndarray | float = 0.0
        #: factor of each axis after centring: the learnt metric (see :mod:`geogpvae.engine.metric`)
        self.x_scale_: np.ndarray | float = 1.0
        #: how far apart the warm-up rounds put the axes, one entry per round run
        self.metric_trace_: list[float] = []
        self.predict_mode_: str | dict | None = None
        self.context_radius_: float = float("inf")
        self.calibration_nll_: dict[str, float] = {}
        #: per regime, the variance added to each variable's decoded spread (calibration chooses)
        self.noise_: dict[str, list[str]] = {}
        #: the KL weight as a multiple of the engine's base weight (``beta="auto"`` chooses it)
        self.kl_factor_: float | None = 1.0
        #: ``beta="auto"``: each candidate factor's calibrated check NLL (nats per value)
        self.kl_scores_: dict[float, float] = {}
        #: variables whose missing values cluster (outages): checked and calibrated in gaps
        self.clustered_gaps_: np.ndarray = np.zeros(0, dtype=bool)
        self.site_levels_: SiteLevels | None = None  #: each station's own level (``fit``'s ``site_axes``)
        self._site_rows: np.ndarray | None = None  # the site of each training location
        self._x = self._y = self._observed = None
        self._context_index: np.ndarray | None = None  # context neighbours of self._x
        self._data: FieldData | None = None
        self._anchor: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------------ basics
    @property
    def device(self) -> torch.device:
        """The torch device the model lives on.

        ``device="auto"``: CUDA if present, but the CPU for one-process fits of whole-field steps or steps
        under ``GPU_MIN_BATCH`` locations (default batches: under 32,768; docs/design-decisions.md).
        """
        n, batch = self.n_points_, self.config.batch_for(self.n_points_ or 1)
        if (self.config.device == "auto" and n and (batch >= n or batch < GPU_MIN_BATCH)
                and not (torch.distributed.is_available() and torch.distributed.is_initialized())):
            return torch.device("cpu")
        return resolve_device(self.config.device)

    @property
    def dtype(self) -> torch.dtype:
        """The model's floating-point type."""
        return _DTYPES[self.config.dtype]

    @property
    def history(self) -> dict[str, list[float]]:
        """Loss history per epoch (see :class:`~geogpvae.engine.training.TrainState`)."""
        return {} if self.train_state is None else self.train_state.history

    def _require_fit(self) -> None:
        if self.model is None:
            raise RuntimeError("the engine is not trained yet: call fit() first (or load a saved one)")

    def _to_model_space(self, values: np.ndarray, observed: np.ndarray, level: np.ndarray | float = 0.0) -> np.ndarray:
        """Log-transform where asked, less each site's ``level`` (N, K), standardised; 0 where not observed."""
        safe = np.where(observed & self.log, values, 1.0)
        mod = np.where(self.log, np.log(safe), values)
        return np.where(observed, (mod - level - self.loc) / self.scale, 0.0)

    def _levels_at(self, x: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
        """Site level and its variance (N, K) at centred ``x`` (None: the training locations), or None."""
        lv = self.site_levels_
        return None if lv is None else lv.at(self._site_rows if x is None else lv.rows(x))

    def _check_values(self, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        values = real_values(values, self.names)
        k = len(self.names)
        if values.ndim != 2 or values.shape != (n, k):
            raise InputError(f"values must have shape ({n}, {k}), got {values.shape}")
        if np.isinf(values).any():
            j = int(np.argwhere(np.isinf(values))[0][1])
            raise InputError(f"{self.names[j]} has infinite values; replace them with NaN (missing) or finite values")
        observed = np.isfinite(values)
        for j in np.flatnonzero(self.log):
            bad = observed[:, j] & (values[:, j] <= 0)
            if bad.any():
                raise InputError(
                    f"cannot log-transform {self.names[j]}: {int(bad.sum())} observed values are <= 0 "
                    f"(minimum {values[observed[:, j], j].min():g}); use no transform or shift the variable"
                )
        return values, observed

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        x: np.ndarray,
        values: np.ndarray,
        *,
        log: np.ndarray | list[bool] | None = None,
        names: list[str] | None = None,
        resume: dict[str, Any] | None = None,
        callback: Callable[..., None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        site_axes: Sequence[int] | None = None,
    ) -> GPVAEEngine:
        """Train on a field.

        Parameters
        ----------
        x : array, shape (N, D)
            Coordinates of the N locations, in model units (scale the axes beforehand as
            wanted: distances in these units define the neighbours and the kernels).
        values : array, shape (N, K)
            The K variables, NaN where missing.
        log : array of bool, shape (K,), optional
            Variables to model in log space (they must be positive where observed).
        names : list of str, optional
            Variable names, used in messages.
        resume : dict, optional
            A checkpoint from :meth:`checkpoint`: training (or the KL-weight selection) continues
            from its last completed epoch and ends as an uninterrupted run would.
        callback : callable, optional
            Called as ``callback(engine)`` after every epoch, ``beta="auto"``'s candidates' too
            (``engine.selection_`` set then), e.g. to save :meth:`checkpoint`.
        should_stop : callable, optional
            Polled after every epoch; when it returns True training stops early and ``fit``
            returns with :attr:`interrupted` set (so a checkpoint can be written and the job
            resumed later).
        site_axes : sequence of int, optional
            The columns of ``x`` that place a station of a network (not its time): each station's
            own level is modelled apart (:mod:`~geogpvae.engine.site_levels`).

        Returns
        -------
        GPVAEEngine
            ``self``.
        """
        if resume is not None:
            _check_resume(resume)
        x, y, observed = self._standardise(x, values, log, names, site_axes)
        if resume is None:
            warn_short_epochs(self.config, x.shape[0])
        x = self._metric(x, y, observed, resume)
        self._lengthscale_for(x, resume)
        self.context_radius_ = context_radius(x, self.config.context_scales, self.config.neighbour_backend)
        self._train(x, y, observed, resume, callback, should_stop)
        self._anchor = self.posterior().anchors(self._training_field())
        if self.config.calibrate and not self.interrupted:
            chosen = calibrate(self.posterior(), progress=self.progress)
            self.calibration_, self.predict_mode_, self.noise_ = chosen.factors, chosen.predict_mode, chosen.noise
            self.calibration_nll_, self.deep_distance_ = chosen.nll, chosen.deep_distance
        return self

    def _standardise(
        self, x: np.ndarray, values: np.ndarray, log: Any, names: list[str] | None,
        site_axes: Sequence[int] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Check the field, fix names, transforms and standardisation; standardised values."""
        cfg = self.config
        x = check_coordinates(x)
        # float64 centring before any float32 cast: offsets such as projected coordinates
        # near 1e8 m would otherwise eat the precision of the model's inputs
        self.x_offset_ = centre(x)
        x = x - self.x_offset_
        values = real_values(values, names)
        if values.ndim != 2 or values.shape[0] != x.shape[0]:
            raise InputError(f"values must have shape (N, K) with N = {x.shape[0]}, got {values.shape}")
        n, k = values.shape
        self.names = list(names) if names is not None else [f"variable {i}" for i in range(k)]
        if len(self.names) != k:
            raise InputError(f"{len(self.names)} names for {k} variables")
        self.log = np.zeros(k, dtype=bool) if log is None else np.asarray(log, dtype=bool)
        if self.log.shape != (k,):
            raise InputError(f"log must have one flag per variable ({k}), got shape {self.log.shape}")
        values, observed = self._check_values(values, n)
        for j in range(k):
            if not observed[:, j].any():
                raise InputError(f"{self.names[j]} has no observed value; leave it out of the variables to impute")
        cfg.check_locations(n)
        self.loc, self.scale = standardisation(values, observed, self.log, self.names)
        self.constant_ = self._constants(values, observed)
        for text in missing_code_warnings(values, observed, self.names):
            warn_caller(text)
        level, self.site_levels_, self._site_rows = 0.0, None, None
        if site_axes is not None:  # a station network: the anomalies about each station's level
            mod = self._to_model_space(values, observed) * self.scale
            self.site_levels_, self._site_rows, level, self.loc, self.scale = about_site_levels(
                mod, observed, x, site_axes, self.loc, self.scale)
        y = self._to_model_space(values, observed, level)
        self._x, self._y, self._observed = x, y, observed
        self._context_index = None
        self.n_points_ = n
        return x, y, observed

    #: whether a fit learns its metric first, and its learning-rate schedule
    learns_metric = True
    schedule = "cosine"

    def _metric(self, x: np.ndarray, y: np.ndarray, observed: np.ndarray, resume: dict | None) -> np.ndarray:
        """The coordinates in the metric the model trains in (a resumed fit keeps its checkpoint's)."""
        self.metric_trace_ = []
        if resume is not None:
            self.x_scale_ = saved_scale(resume["engine"])
        elif self.learns_metric and uses_learnt_metric(self.config, x.shape[1]):
            self.x_scale_ = learn_metric(self._warm_fit, x, y, observed, trace=self.metric_trace_,
                                         rounds=warmup_rounds(self.config, x.shape[0]), progress=self.progress)
        else:
            self.x_scale_ = 1.0
        if np.all(np.asarray(self.x_scale_) == 1.0):
            return x
        x = x * self.x_scale_
        self._x = x  # the field held for prediction is in the same metric
        return x

    def _warm_fit(self, x: np.ndarray, values: np.ndarray) -> np.ndarray | None:
        """A short warm-up fit at the base KL weight and a constant rate; its lengthscales (L, D)."""
        cfg = self.config
        beta = None if cfg.beta == "auto" else cfg.beta
        warm = _WarmUp(cfg.replace(epochs=warmup_epochs(cfg, x.shape[0]), calibrate=False, beta=beta), progress=False)
        with warnings.catch_warnings():  # what the field holds is said once, by the main fit
            warnings.simplefilter("ignore", UserWarning)
            warm.fit(x, values)
        ls = getattr(warm.model.kernel, "lengthscale", None)
        return None if ls is None else ls.detach().cpu().double().numpy()

    def _constants(self, values: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """:attr:`constant_`, with a warning for each constant variable and each one with
        fewer than :data:`MIN_CONSTANT_VALUES` observed values (no spread to learn from)."""
        counts = observed.sum(0)
        found = np.where(counts >= MIN_CONSTANT_VALUES, constant_values(values, observed), np.nan)
        for j, name in enumerate(self.names):
            if np.isfinite(found[j]):
                warn_caller(f"{name}: all {counts[j]} observed values are {found[j]:g}: its gaps are "
                            "filled with that value, standard deviation 0")
            elif counts[j] < MIN_CONSTANT_VALUES:
                warn_caller(f"{name} has only {counts[j]} observed value(s), too few to learn its spread "
                            "from: its fills and their standard deviations are rough")
        return found

    def _lengthscale_for(self, x: np.ndarray, resume: dict[str, Any] | None) -> None:
        """The initial lengthscale: saved, given, or the median distance to the H-th neighbour."""
        cfg = self.config
        if resume is not None:
            self.lengthscale_ = float(resume["engine"]["lengthscale"])
        elif cfg.lengthscale is None:
            self.lengthscale_ = start_lengthscale(x, cfg.neighbours, cfg.neighbour_backend)
        else:
            self.lengthscale_ = float(cfg.lengthscale)

    def _train(self, x, y, observed, resume, callback, should_stop) -> None:
        """Prepare the tensors, build (or restore) the model and train it (``beta="auto"``: the candidates)."""
        cfg, n, k = self.config, x.shape[0], y.shape[1]
        self.noise_start_ = (
            nugget(x, y, observed, seed=cfg.seed, backend=cfg.neighbour_backend)
            if cfg.noise is None else np.full(k, float(cfg.noise))
        )
        torch.manual_seed(cfg.seed)
        selecting = cfg.beta == "auto" and (resume is None or resume["engine"].get("kl_factor") is None)
        fraction = SELECTION_HOLDOUT if selecting else 0.0
        self.clustered_gaps_ = np.zeros(k, dtype=bool)
        hiding = cfg.batch_for(n) >= n  # context hiding on whole-field fits (mini-batches: no gain)
        detect = fraction > 0 or cfg.calibrate or (hiding and cfg.mask_rate > 0 and bool(cfg.context_scales))
        if detect:  # else unused
            self.clustered_gaps_ = clustered_gaps(x, observed, seed=cfg.seed, backend=cfg.neighbour_backend)
        check, weights = held_out(x, observed, fraction, seed=cfg.seed, shaped=self.clustered_gaps_, backend=cfg.neighbour_backend)
        if cfg.context_scales and x is self._x and self._context_index is None:
            self._context_index = context_index(x, cfg.context_scales, backend=cfg.neighbour_backend)
        self._data = field_data(x, y, observed, cfg, device=self.device, dtype=self.dtype, check=check,
                                check_weights=weights,
                                context_idx=self._context_index if x is self._x else None)
        variables = ~self.clustered_gaps_ if hiding else np.zeros(k, dtype=bool)
        if self._data.context is not None and variables.any():  # the neighbours kept only where used
            index = self._context_index if x is self._x else context_index(x, cfg.context_scales, backend=cfg.neighbour_backend)
            self._data = with_context_hiding(self._data, index, cfg.context_scales, variables, CONTEXT_HIDING_SHARE)
        self.interrupted = False
        self.calibration_ = np.ones((2, k))
        self.noise_ = {}
        self.kl_factor_ = 1.0 if resume is None else resume["engine"].get("kl_factor", 1.0)
        self.kl_scores_ = {} if resume is None else {float(f): v for f, v in resume["engine"].get("kl_scores", {}).items()}
        self.selection_ = None
        if resume is not None and "selection" in resume and cfg.beta != "auto":
            raise ValueError("this checkpoint was written during beta='auto''s selection: resume it with beta='auto'")
        if selecting and self._data.check is not None:
            model, state = self._select_kl_factor(x, y, observed, should_stop, callback, resume)
            if model is None:
                return
        else:
            model, state = distributed(self._build_model(k, x.shape[1], n, self.kl_factor_), self.device), None
            if resume is not None:
                (model.module if hasattr(model, "module") else model).load_state_dict(with_hidden_moments(resume["engine"]["weights"], k))
                state = train_state_from(resume["train"])
        self.model = model.module if hasattr(model, "module") else model

        def _callback(train_state, _model, _opt):
            self.train_state = train_state
            if callback is not None:
                callback(self)

        self.train_state = train(model, self._data, cfg, state=state, progress=self.progress, callback=_callback,
                                 should_stop=should_stop, schedule=self.schedule)
        self.interrupted = not self.train_state.done
        if self._data.check is not None:  # predict from every observed value
            self._data = self._without_check(x, y, observed)

    def _without_check(self, x: np.ndarray, y: np.ndarray, observed: np.ndarray) -> FieldData:
        """The training data with the held-out values back in (same neighbour structures)."""
        full = self.posterior().field(x, y, observed)
        return dataclasses.replace(self._data, y=full.y, observed=full.observed, context=full.context, check=None)

    def _select_kl_factor(self, x, y, observed, should_stop, callback, resume) -> tuple[Any, TrainState | None]:
        """``beta="auto"``: train the candidates and keep the best; ``(None, None)`` if interrupted."""
        cfg, n, k = self.config, x.shape[0], y.shape[1]
        factors, epochs = KL_FACTORS, selection_epochs(cfg.n_epochs(n), selection_share(cfg, n))

        def build(factor):
            return distributed(self._build_model(k, x.shape[1], n, factor), self.device)
        def on_epoch(progress, call=True):  # the candidate in training stands as the engine's model
            self.selection_, self.train_state = progress, progress.state
            self.model = progress.model.module if hasattr(progress.model, "module") else progress.model
            if call and callback is not None:
                callback(self)

        shape = self.clustered_gaps_.copy()  # the variances' shape judged where gaps cluster
        chosen = select_kl_factor(build, self._data, cfg, epochs=epochs, should_stop=should_stop, progress=self.progress,
                                  factors=factors, resume=selection_from(resume, build, k, epochs, factors),
                                  on_epoch=on_epoch, shape=shape, then=cfg.n_epochs(n) - epochs)
        self.kl_scores_, self.selection_, self.kl_factor_ = dict(chosen.scores), None, chosen.factor
        if chosen.factor is None:
            self.interrupted, self.train_state, self.model = True, TrainState(), self._build_model(k, x.shape[1], n)
            if chosen.progress is not None:
                on_epoch(chosen.progress, call=False)
            return None, None
        self._data = self._without_check(x, y, observed)
        return chosen.model, chosen.state

    interrupted: bool = False
    selection_ = None  # SelectionProgress while beta="auto" is choosing (see _select_kl_factor)
    deep_distance_ = None  # beyond it from the data a target is deep in a gap (Posterior.deep_rows)

    def _build_model(self, n_vars: int, n_dims: int, n_points: int, kl_factor: float | None = None,
                     hidden_variance: bool | None = None) -> GPVAE:
        noise = None if self.noise_start_ is None else self.noise_start_.tolist()  # None: loaded weights
        return build_model(self.config, n_vars, n_dims, n_points, lengthscale=self.lengthscale_, noise=noise,
                           kl_factor=kl_factor, hidden_variance=hidden_variance, device=self.device)

    @property
    def training_locations(self) -> np.ndarray | None:
        """The training field's locations, in the units the engine was fitted with (or None)."""
        return None if self._x is None else self._x / self.x_scale_ + self.x_offset_

    def training_rows(self, x: np.ndarray, values: np.ndarray) -> np.ndarray | None:
        """The training row that each row of a field repeats, or None for another field.

        Parameters
        ----------
        x : ndarray, shape (N, D)
            Locations, in the units the engine was fitted with.
        values : ndarray, shape (N, K)
            Values, NaN where missing.

        Returns
        -------
        ndarray of int, shape (N,), or None
            ``rows`` such that ``predict().take(rows)`` is the prediction at ``x`` when
            ``(x, values)`` is the training field reordered or rounded to float32; else None.
        """
        if self._x is None or self._data is None:
            return None
        levels = self._levels_at(None)
        own = self._y * self.scale + self.loc + (0.0 if levels is None else levels[0])
        own[:, self.log] = np.exp(own[:, self.log])  # only log-modelled columns: no overflow
        own[~self._observed] = np.nan
        return matching_rows(self.training_locations, own, x, values)

    # ------------------------------------------------------------------ posterior
    def posterior(self) -> Posterior:
        """What the fitted engine predicts with: model, options, standardisation, field, calibration."""
        return Posterior(
            model=self.model, config=self.config, loc=self.loc, scale=self.scale, log=self.log,
            train_x=self._x, train_y=self._y, train_observed=self._observed, context_index=self._context_index,
            context_radius=self.context_radius_, predict_mode=self.predict_mode_, noise=self.noise_,
            calibration=self.calibration_, deep_distance=self.deep_distance_, clustered=self.clustered_gaps_,
            device=self.device, dtype=self.dtype,
        )

    def _training_field(self) -> Targets:
        d = self._data
        return Targets(d.x, d.y, d.observed, d.context)

    # ------------------------------------------------------------------ predict
    @one_at_a_time
    @torch.no_grad()
    def predict(
        self,
        x: np.ndarray | None = None,
        values: np.ndarray | None = None,
        *,
        mode: str | None = None,
        samples: int | None = None,
        seed: int | None = None,
        calibrated: bool = True,
        rows: np.ndarray | None = None,
    ) -> Prediction:
        """Predict every variable, with its uncertainty.

        Parameters
        ----------
        x : array, shape (M, D), optional
            Locations. Without ``values`` these are new locations with nothing observed,
            predicted from the training field. Default: the training locations.
        values : array, shape (M, K), optional
            A field (NaN where missing) at ``x`` to impute with the trained model: its own
            observed values are encoded and its neighbours drawn from itself.
        mode : {"auto", "encoder", "neighbours", "combined"}, optional
            Source of the latent posterior at locations with observations (default: the
            config's ``predict_mode``). Locations without any use the neighbours.
        samples : int, optional
            Monte Carlo samples of z (default: the config's ``samples``).
        seed : int, optional
            Seed of the Monte Carlo samples (default: the config's ``seed``).
        calibrated : bool
            Apply the variance calibration learnt after training.
        rows : array of int, shape (M,), optional
            Without ``x``: predict only these training locations (rows of the training field), e.g.
            one block of a lazy output. Each row's prediction does not depend on the others.

        Returns
        -------
        Prediction
        """
        self._require_fit()
        cfg = self.config
        if rows is not None and x is not None:
            raise InputError("rows picks training locations: leave out x (and values) to use it")
        mode = mode or cfg.predict_mode
        if mode not in ("auto", "encoder", "neighbours", "combined"):
            raise ValueError(f"unknown mode {mode!r}; choose auto, encoder, neighbours or combined")
        samples = samples or cfg.samples
        seed = cfg.seed if seed is None else seed
        self.model.eval()
        post = self.posterior()
        if values is not None:
            if x is None:
                raise InputError("values need their coordinates x")
            xq = (xc := check_coordinates(x) - self.x_offset_) * self.x_scale_
            if xq.shape[1] != self.model.n_dims:
                raise InputError(f"coordinates have {xq.shape[1]} dimensions; the model was trained on {self.model.n_dims}")
            vals, observed = self._check_values(values, xq.shape[0])
            levels = self._levels_at(xc)
            y = self._to_model_space(vals, observed, 0.0 if levels is None else levels[0])
            check_standardised(y, self.names)
            field = post.field(xq, y, observed)
            anchor = post.anchors(field)
            n = xq.shape[0]
            targets, self_index = rows_of(field), self_index_of(anchor, n)
        elif x is None:
            if self._data is None:
                raise RuntimeError("this engine holds no training field (saved without data): pass x (and values)")
            field = self._training_field()
            anchor, n = self._anchor, field.x.shape[0]
            rows = None if rows is None else checked_rows(rows, n)
            targets, self_index, levels = rows_of(field, rows), self_index_of(anchor, n), self._levels_at(None)
            if rows is not None:
                self_index, n = self_index[rows], len(rows)
                levels = None if levels is None else tuple(part[rows] for part in levels)
        else:
            xq = (xc := check_coordinates(x, "new locations") - self.x_offset_) * self.x_scale_
            if xq.shape[1] != self.model.n_dims:
                raise InputError(f"new locations have {xq.shape[1]} dimensions; the model was trained on {self.model.n_dims}")
            levels = self._levels_at(xc)
            if self._anchor is None:
                raise RuntimeError("this engine holds no training field to predict from")
            anchor, self_index, n = self._anchor, None, xq.shape[0]

            def targets(rows: slice) -> Targets:
                return post.new_locations(xq[rows])

        out = self._predict_in_chunks(post, targets, n, anchor, self_index, mode, samples=samples, seed=seed,
                                      calibrated=calibrated)
        return out if levels is None else with_levels(out, *levels, self.log, self.constant_)

    def _predict_in_chunks(self, post: Posterior, targets: Callable[[slice], Targets], n: int, anchor: dict,
                           self_index: np.ndarray | None, mode: str, **moments: Any) -> Prediction:
        """Predict ``n`` targets, :data:`PREDICT_CHUNK` at a time; ``targets(rows)`` gives a slice's
        targets, ``self_index`` each one's own anchor row (-1: none; None: new locations)."""
        parts = []
        with Progress(self.progress, n, "prediction", unit="locations") as bar:
            for start in range(0, max(n, 1), PREDICT_CHUNK):
                rows = slice(start, min(start + PREDICT_CHUNK, n))
                target = targets(rows)
                own = None if self_index is None else self_index[rows]
                mean, var, source = post.latent(target, anchor, own, mode)
                has_own = target.observed.any(1).cpu().numpy()
                parts.append((*post.moments(mean, var, has_own=has_own, visible=target.observed, **moments),
                              source))
                bar.update(rows.stop)
        m, s, mm, sm, source = (np.concatenate(p) for p in zip(*parts, strict=True))
        fixed = np.isfinite(self.constant_) if self.constant_ is not None else np.zeros(m.shape[1], bool)
        if fixed.any():  # a constant variable: its value, no spread (the model learnt only noise)
            value = self.constant_[fixed]
            m[:, fixed], mm[:, fixed] = value, [np.log(v) if lg else v for v, lg in zip(value, self.log[fixed])]
            s[:, fixed] = sm[:, fixed] = 0.0
        return Prediction(mean=m, std=s, mean_model=mm, std_model=sm, source=source)

    # ------------------------------------------------------------------ state
    def state_dict(self, *, include_data: bool = True) -> dict[str, Any]:
        """Everything needed to predict again: options, scalers, weights, calibration.

        Parameters
        ----------
        include_data : bool
            Also store the training field (coordinates, standardised values, mask), which
            :meth:`predict` needs for new locations. Without it only ``predict(x, values)``
            works after loading.

        Returns
        -------
        dict
            Tensors and plain Python values only (:func:`geogpvae.engine.state.engine_state`).
        """
        self._require_fit()
        return engine_state(self, include_data=include_data)

    def checkpoint(self) -> dict[str, Any]:
        """A resumable snapshot: :meth:`state_dict` (without data) plus optimiser and epoch."""
        self._require_fit()
        return checkpoint_state(self)

    @classmethod
    def from_state_dict(
        cls, state: dict[str, Any], *, device: str | None = None, progress: bool | str = True
    ) -> GPVAEEngine:
        """Rebuild a trained engine from :meth:`state_dict` output.

        Parameters
        ----------
        state : dict
        device : str, optional
            Override the saved device (e.g. load a GPU-trained model on a CPU).
        progress : bool or str
        """
        cfg, hidden = saved_config(state, device)
        eng = cls(cfg, progress=progress)
        for name, value in saved_attributes(state).items():
            setattr(eng, name, value)
        eng.model = eng._build_model(len(eng.names), int(state["n_dims"]), eng.n_points_, eng.kl_factor_,
                                     hidden_variance=hidden)
        eng.model.load_state_dict(with_hidden_moments(state["weights"], len(eng.names)))
        eng.model.eval()
        if eng._x is not None:
            if cfg.context_scales:
                eng._context_index = context_index(eng._x, cfg.context_scales, backend=cfg.neighbour_backend)
            field = eng.posterior().field(eng._x, eng._y, eng._observed)
            eng._data = FieldData(field.x, field.y, field.observed, field.context, nbr=torch.empty(0))
            eng._anchor = eng.posterior().anchors(field)
        return eng


def _check_resume(snapshot: Any) -> None:
    """Refuse, before any work, a ``resume`` that is not an intact checkpoint (ValueError)."""
    try:
        check_checkpoint(snapshot, build_model)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, RuntimeError) as err:
        what = f"missing entry {err}" if isinstance(err, KeyError) else str(err).splitlines()[0][:300]
        raise ValueError(f"resume is not an intact geogpvae checkpoint ({what})") from None


def build_model(config: GPVAEConfig, n_vars: int, n_dims: int, n_points: int, *, lengthscale: float,
                noise: float | list[float] | None = None, kl_factor: float | None = None,
                hidden_variance: bool | None = None, device: torch.device | str = "cpu") -> GPVAE:
    """A freshly initialised model for a field, seeded by ``config.seed``.

    Parameters
    ----------
    config : GPVAEConfig
    n_vars, n_dims, n_points : int
        K variables, D coordinates, N locations.
    lengthscale : float
        Initial latent lengthscale, in model coordinate units.
    noise : float or list of float, optional
        Initial likelihood variance (standardised units), one for all or one per variable
        (default: :class:`GPVAE`'s, for weights loaded next).
    kl_factor : float, optional
        The KL weight as a multiple of the base weight (default 1).
    hidden_variance : bool, optional
        Estimate the hidden-value variance (default: where ``mask_rate > 0``).
    device : torch.device or str

    Returns
    -------
    GPVAE
    """
    if hidden_variance is None:
        hidden_variance = config.mask_rate > 0
    torch.manual_seed(config.seed)
    model = GPVAE(
        n_vars, n_dims, config.latent_size(n_vars), engine=config.engine,
        context_dim=2 * n_vars * len(config.context_scales), encoder_hidden=config.encoder_hidden,
        decoder_hidden=config.decoder_hidden, kernel=config.kernel, lengthscale=lengthscale,
        beta=config.kl_weight(n_points, kl_factor or 1.0), hidden_variance=hidden_variance,
        **({} if noise is None else {"noise": noise}),
    )
    return model.to(device=device, dtype=_DTYPES[config.dtype])


class _WarmUp(GPVAEEngine):
    """The metric's warm-up fits: no metric of their own, a constant learning rate."""

    learns_metric = False
    schedule = "constant"
