"""The engine as users of plain arrays see it: NumPy in, NumPy out, no xarray.

:class:`GPVAEEngine` checks the inputs, transforms and standardises the variables, chooses the
data-dependent defaults, trains the model and predicts every variable at every location (or at
new locations, or on a new field) with its standard deviation, in the original units.

Its state (options, standardisation, weights, calibration and, optionally, the training field)
is a dictionary of tensors and plain Python values (:mod:`geogpvae.engine.state`): it saves
with :func:`torch.save` and loads with ``torch.load(..., weights_only=True)``, which never
unpickles arbitrary objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import InputError, warn_caller
from ..gp.kernels import stretched
from ..gp.neighbours import knn
from .calibration import REGIMES, calibrate, deep_rows, split_mode, stretched_neighbours
from .config import GPVAEConfig, warn_short_epochs
from .holdout import clustered_gaps, held_out
from .inputs import (
    centre,
    check_coordinates,
    check_standardised,
    constant_values,
    missing_code_warnings,
    real_values,
    standardisation,
)
from .members import fit_members, with_members
from .memorisation import check_mask, corrects_memorisation, memorisation_ratios
from .metric import apply_metric
from .model import GPVAE
from .nugget import NUGGET_BOUNDS, nugget
from .predict import (
    added_variance,
    combine_posteriors,
    encoder_posterior,
    neighbour_posterior,
    predictive_moments,
    variance_scale,
)
from .progress import Progress
from .same_field import matching_rows
from .selection import (
    KL_FACTORS,
    score_shape,
    select_kl_factor,
    selection_epochs,
    selection_holdout,
    selection_share,
)
from .starts import channel_lengthscales, start_lengthscales
from .state import (
    STATE_FORMAT,
    checkpoint_state,
    engine_state,
    restore_engine,
    selection_from,
    train_state_from,
    with_hidden_moments,
)
from .targets import _Field, _rows_of, _self_index
from .threads import configure_threads
from .training import (
    CONTEXT_HIDING_SHARE,
    FieldData,
    TrainState,
    context_index,
    context_radius,
    field_data,
    neighbourhood_context,
    resolve_device,
    train,
    with_context_hiding,
)

__all__ = ["GPVAEEngine", "Prediction", "STATE_FORMAT"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass
class Prediction:
    """Predictive moments at a set of locations.

    Attributes
    ----------
    mean, std : ndarray, shape (M, K)
        Predictive mean and standard deviation in the original units. For a variable modelled
        in log space they are the mean and standard deviation of the back-transformed
        (log-normal mixture) predictive distribution.
    mean_model, std_model : ndarray, shape (M, K)
        The predictive mean and standard deviation in the modelled space (the log of the
        variable for log-transformed ones), where the predictive is close to Gaussian.
    source : ndarray of int8, shape (M,)
        Where each latent posterior came from: 0 encoder, 1 neighbours, 2 both combined.

    Notes
    -----
    A variable whose observed values (at least :data:`MIN_CONSTANT_VALUES`) are all equal is
    predicted as that value everywhere, with standard deviation 0.
    """

    mean: np.ndarray
    std: np.ndarray
    mean_model: np.ndarray
    std_model: np.ndarray
    source: np.ndarray

    def take(self, rows: np.ndarray) -> Prediction:
        """The prediction at some of its locations.

        Parameters
        ----------
        rows : ndarray of int, shape (M,)
            Indices along the first axis (locations), in the order wanted; repeats allowed.

        Returns
        -------
        Prediction
            Every array indexed by ``rows``: means and stds of shape (M, K), sources (M,).
        """
        return Prediction(*(getattr(self, f.name)[rows] for f in dataclasses.fields(self)))


#: the fewest observed values, all equal, that make a variable constant (filled with that
#: value, standard deviation 0); one or two values say nothing about a variable's spread
MIN_CONSTANT_VALUES = 3

#: locations predicted at a time (a multiple of the chunks of :mod:`geogpvae.engine.predict`,
#: so that a field of up to this many locations is one pass); progress is reported after each
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
        self.lengthscale_near_: float | None = None  # extra["lengthscale_spread"] only
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
        #: per regime (``"observed"``, ``"unobserved"``), the variance the predictive adds to
        #: the decoded spread of each variable, one of :data:`~geogpvae.engine.calibration.NOISES`
        #: (calibration chooses; see ``hidden_variance``); a regime absent: the model's ``hidden_var``
        self.noise_: dict[str, list[str]] = {}
        #: the KL weight as a multiple of the engine's base weight (``beta="auto"`` chooses it)
        self.kl_factor_: float | None = 1.0
        #: ``beta="auto"``: each candidate factor's calibrated check NLL (nats per value)
        self.kl_scores_: dict[float, float] = {}
        #: never-trained over trained values' squared z-scores (:mod:`~geogpvae.engine.memorisation`)
        self.memorisation_: dict[str, float] = {}
        #: the other models of ``members > 1`` (:mod:`~geogpvae.engine.members`), predicting with this one
        self.members_: list[GPVAEEngine] = []
        #: variables whose missing values cluster (outages): checked and calibrated in gaps
        self.clustered_gaps_: np.ndarray = np.zeros(0, dtype=bool)
        self._x = self._y = self._observed = None
        self._context_index: np.ndarray | None = None  # context neighbours of self._x
        self._data: FieldData | None = None
        self._anchor: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------------ basics
    @property
    def device(self) -> torch.device:
        """The torch device the model lives on.

        ``device="auto"`` is the first CUDA device when there is one, except for a field whose
        every training step takes the whole field (up to ``FULL_BATCH`` locations by default)
        in a single process: such a fit is bound by kernel launches on a GPU and runs faster on
        the CPU (a 361-site survey took 15 s on an H200, 10 s on the same machine's 16 CPU
        threads; docs/benchmarks.md, "On a GPU"). An explicit ``"cuda"`` is always honoured.
        """
        n = self.n_points_
        if (self.config.device == "auto" and n and self.config.batch_for(n) >= n
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

    def _to_model_space(self, values: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """Log-transform where asked and standardise; 0 where not observed."""
        safe = np.where(observed & self.log, values, 1.0)
        mod = np.where(self.log, np.log(safe), values)
        return np.where(observed, (mod - self.loc) / self.scale, 0.0)

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
            (``engine.selection_`` set then), e.g. to save :meth:`checkpoint`; with
            ``members > 1``, then with each further member in training.
        should_stop : callable, optional
            Polled after every epoch; when it returns True training stops early and ``fit``
            returns with :attr:`interrupted` set (so a checkpoint can be written and the job
            resumed later).

        Returns
        -------
        GPVAEEngine
            ``self``.
        """
        given = x  # the members train on the field as given
        x, y, observed = self._standardise(x, values, log, names)
        if resume is None:
            warn_short_epochs(self.config, x.shape[0])
        x = apply_metric(self, x, y, observed, resume)
        self._lengthscale_for(x, resume)
        self.context_radius_ = context_radius(x, self.config.context_scales, self.config.neighbour_backend)
        self._train(x, y, observed, resume, callback, should_stop)
        self._anchor = self._anchors(self._training_field())
        if self.config.calibrate and not self.interrupted:
            self.calibration_ = calibrate(self)
        self.members_ = fit_members(self, given, values, log, names, callback, should_stop, resume)
        return self

    def _standardise(
        self, x: np.ndarray, values: np.ndarray, log: Any, names: list[str] | None
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
        y = self._to_model_space(values, observed)
        self._x, self._y, self._observed = x, y, observed
        self._context_index = None
        self.n_points_ = n
        return x, y, observed

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
        self.lengthscale_near_ = None
        if resume is not None:
            self.lengthscale_ = float(resume["engine"]["lengthscale"])
        elif cfg.lengthscale is None:
            self.lengthscale_, self.lengthscale_near_ = start_lengthscales(x, cfg.neighbours, cfg.extra,
                                                                           cfg.neighbour_backend)
        else:
            self.lengthscale_ = float(cfg.lengthscale)

    def _train(self, x, y, observed, resume, callback, should_stop) -> None:
        """Prepare the tensors, build (or restore) the model and train it.

        With the stopping rule, a share of the observed values is held out of training (see
        :mod:`geogpvae.engine.stopping`); afterwards the field held for prediction has them all.
        """
        cfg, n, k = self.config, x.shape[0], y.shape[1]
        self.noise_start_ = (
            nugget(x, y, observed, bounds=tuple(cfg.extra.get("nugget_bounds", NUGGET_BOUNDS)), seed=cfg.seed, backend=cfg.neighbour_backend)
            if cfg.noise is None else np.full(k, float(cfg.noise))
        )
        torch.manual_seed(cfg.seed)
        selecting = cfg.beta == "auto" and (resume is None or resume["engine"].get("kl_factor") is None)
        fraction = cfg.holdout if cfg.stops_early() else (selection_holdout(cfg, n) if selecting else 0.0)
        self.clustered_gaps_ = np.zeros(k, dtype=bool)
        hiding = cfg.extra.get("context_hiding", "auto")
        hiding = False if hiding == "auto" and cfg.batch_for(n) < n else hiding  # mini-batches: 10 % an epoch, no gain
        detect = fraction > 0 or cfg.calibrate or (hiding == "auto" and cfg.mask_rate > 0 and bool(cfg.context_scales))
        if cfg.extra.get("holdout") != "random" and detect:  # else unused
            self.clustered_gaps_ = clustered_gaps(x, observed, seed=cfg.seed, backend=cfg.neighbour_backend)
        check, weights = held_out(x, observed, fraction, seed=cfg.seed, shaped=self.clustered_gaps_, backend=cfg.neighbour_backend)
        if cfg.context_scales and x is self._x and self._context_index is None:
            self._context_index = context_index(x, cfg.context_scales, backend=cfg.neighbour_backend)
        self._data = field_data(x, y, observed, cfg, device=self.device, dtype=self.dtype, check=check,
                                check_weights=weights,
                                context_idx=self._context_index if x is self._x else None)
        variables = np.full(k, bool(hiding)) if hiding != "auto" else ~self.clustered_gaps_
        if self._data.context is not None and variables.any():  # the neighbours kept only where used
            index = self._context_index if x is self._x else context_index(x, cfg.context_scales, backend=cfg.neighbour_backend)
            self._data = with_context_hiding(self._data, index, cfg.context_scales, variables,
                                             cfg.extra.get("context_hiding_share", CONTEXT_HIDING_SHARE))
        self.interrupted = False
        self.calibration_ = np.ones((2, k))
        self.noise_ = {}
        self.kl_factor_ = 1.0 if resume is None else resume["engine"].get("kl_factor", 1.0)
        self.kl_scores_ = {} if resume is None else {float(f): v for f, v in resume["engine"].get("kl_scores", {}).items()}
        self.memorisation_ = {} if resume is None else dict(resume["engine"].get("memorisation") or {})
        self.selection_, self.members_, self.member_in_training_ = None, [], None
        if resume is not None and "selection" in resume and cfg.beta != "auto":
            raise ValueError("this checkpoint was written during beta='auto''s selection: resume it with beta='auto'")
        if selecting and self._data.check is not None:
            model, state = self._select_kl_factor(x, y, observed, should_stop, callback, resume)
            if model is None:
                return
        else:
            model, state = _distributed(self._build_model(k, x.shape[1], n, self.kl_factor_), self.device), None
            if resume is not None:
                (model.module if hasattr(model, "module") else model).load_state_dict(with_hidden_moments(resume["engine"]["weights"], k))
                state = train_state_from(resume["train"])
        self.model = model.module if hasattr(model, "module") else model

        def _callback(train_state, _model, _opt):
            self.train_state = train_state
            if callback is not None:
                callback(self)

        self.train_state = train(model, self._data, cfg, state=state, progress=self.progress, callback=_callback, should_stop=should_stop)
        self.interrupted = not self.train_state.done
        if self._data.check is not None:  # predict from every observed value; the model never trained on the check values:
            if self.train_state.done and corrects_memorisation(cfg, n):  # its own recall, unscaled (no average: the kept weights)
                final = dataclasses.replace(self.train_state, average=None)
                self.memorisation_ = memorisation_ratios(self, self.model, final, check_mask(self._data.check, y.shape))
            self._data = self._without_check(x, y, observed)

    def _without_check(self, x: np.ndarray, y: np.ndarray, observed: np.ndarray) -> FieldData:
        """The training data with the held-out values back in (same neighbour structures)."""
        full = self._make_field(x, y, observed)
        return dataclasses.replace(self._data, y=full.y, observed=full.observed, context=full.context, check=None)

    def _select_kl_factor(self, x, y, observed, should_stop, callback, resume) -> tuple[Any, TrainState | None]:
        """``beta="auto"``: train the candidates, keep the best (the check values then go back unless the
        stopping rule needs them). Interrupted: ``(None, None)``, ``selection_`` kept for :meth:`checkpoint`."""
        cfg, n, k = self.config, x.shape[0], y.shape[1]
        budget = cfg.replace(holdout=0.0).n_epochs(n)  # with the stopping rule: the budget it replaces
        factors, epochs = tuple(cfg.extra.get("kl_factors", KL_FACTORS)), selection_epochs(budget, selection_share(cfg, n))

        def build(factor):
            return _distributed(self._build_model(k, x.shape[1], n, factor), self.device)
        def on_epoch(progress, call=True):  # the candidate in training stands as the engine's model
            self.selection_, self.train_state = progress, progress.state
            self.model = progress.model.module if hasattr(progress.model, "module") else progress.model
            if call and callback is not None:
                callback(self)

        shape = score_shape(cfg.extra.get("selection_score", "auto"), self.clustered_gaps_)
        chosen = select_kl_factor(build, self._data, cfg, epochs=epochs, should_stop=should_stop, progress=self.progress,
                                  factors=factors, resume=selection_from(resume, build, k, epochs, factors),
                                  on_epoch=on_epoch, shape=shape, then=cfg.n_epochs(n) - epochs)
        self.kl_scores_, self.selection_, self.kl_factor_ = dict(chosen.scores), None, chosen.factor
        if chosen.factor is None:
            self.interrupted, self.train_state, self.model = True, TrainState(), self._build_model(k, x.shape[1], n)
            if chosen.progress is not None:
                on_epoch(chosen.progress, call=False)
            return None, None
        if not cfg.stops_early():  # (with the stopping rule the fitted model measures its own recall: _train)
            if corrects_memorisation(cfg, n):  # the candidate never trained on its check values
                self.memorisation_ = memorisation_ratios(self, chosen.model, chosen.state, check_mask(self._data.check, y.shape), budget)
            self._data = self._without_check(x, y, observed)
        return chosen.model, chosen.state

    interrupted: bool = False
    selection_ = None  # SelectionProgress while beta="auto" is choosing (see _select_kl_factor)
    member_in_training_ = None  # members > 1: the member training now (see engine/members.py)
    deep_distance_ = None  # beyond it from the data a target is deep in a gap (calibration.deep_rows)

    def _build_model(self, n_vars: int, n_dims: int, n_points: int, kl_factor: float | None = None) -> GPVAE:
        cfg = self.config
        torch.manual_seed(cfg.seed)
        model = GPVAE(
            n_vars,
            n_dims,
            cfg.latent_size(n_vars),
            engine=cfg.engine,
            context_dim=2 * n_vars * len(cfg.context_scales),
            encoder_hidden=cfg.encoder_hidden,
            decoder_hidden=cfg.decoder_hidden,
            kernel=cfg.kernel,
            lengthscale=channel_lengthscales(self.lengthscale_, self.lengthscale_near_, cfg.latent_size(n_vars)),
            outputscale=cfg.outputscale,
            learn_kernel=cfg.learn_kernel,
            noise=self.noise_start_.tolist() if self.noise_start_ is not None else (cfg.noise or 0.1),
            learn_noise=cfg.learn_noise,
            beta=cfg.kl_weight(n_points, kl_factor or 1.0),
            jitter=cfg.jitter,
            hidden_variance=cfg.hidden_variance if cfg.mask_rate > 0 else False,
        )
        return model.to(device=self.device, dtype=self.dtype)

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
            A permutation ``rows`` such that ``predict().take(rows)`` is the training
            field's prediction at ``x``, when ``(x, values)`` is the training field in
            another row order or rounded to float32 (see
            :func:`~geogpvae.engine.same_field.matching_rows`); None otherwise, or when
            the engine was saved without its training field.
        """
        if self._x is None or self._data is None:
            return None
        own = self._y * self.scale + self.loc
        own[:, self.log] = np.exp(own[:, self.log])  # only log-modelled columns: no overflow
        own[~self._observed] = np.nan
        return matching_rows(self.training_locations, own, x, values)

    # ------------------------------------------------------------------ fields and posteriors
    def _training_field(self) -> _Field:
        d = self._data
        return _Field(d.x, d.y, d.observed, d.context)

    def _make_field(self, x: np.ndarray, y: np.ndarray, observed: np.ndarray) -> _Field:
        cfg = self.config
        ctx = None
        if cfg.context_scales:
            index = None
            if x is self._x:  # the training locations: their context neighbours are kept
                if self._context_index is None:
                    self._context_index = context_index(x, cfg.context_scales, backend=cfg.neighbour_backend)
                index = self._context_index
            ctx = neighbourhood_context(x, y, observed, cfg.context_scales, backend=cfg.neighbour_backend,
                                        index=index)

        def t(a, dt=self.dtype):
            return torch.as_tensor(np.ascontiguousarray(a)).to(device=self.device, dtype=dt)

        return _Field(t(x), t(y), t(observed, torch.bool), None if ctx is None else t(ctx))

    @torch.no_grad()
    def _anchors(self, field: _Field) -> dict[str, torch.Tensor]:
        """Encoder posterior of every location of ``field`` that has an observed value."""
        self.model.eval()
        mean, var = encoder_posterior(self.model, field.y, field.observed, field.context)
        has_obs = field.observed.any(1)
        return {"x": field.x[has_obs], "mean": mean[has_obs], "var": var[has_obs],
                "index": torch.nonzero(has_obs).squeeze(1)}

    @torch.no_grad()
    def _sources(self, target: _Field, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None,
                 need: torch.Tensor | None = None) -> dict:
        """Both latent posteriors at the targets: the neighbours' and the encoder's.

        ``need`` (bool, shape (M,)) limits the neighbours' posterior, the costly one, to the
        targets that use it; the others get the prior there (mean 0, marginal variance).
        """
        model = self.model
        rows = None if need is None or bool(need.all()) else torch.nonzero(need).squeeze(1)
        mean_g, var_g = self._neighbours(target.x, anchor, self_index, rows)
        if rows is not None:
            prior = (model.kernel.outputscale * (1.0 + model.jitter)).detach().to(mean_g.dtype)
            full_mean = mean_g.new_zeros((target.x.shape[0], model.latent_dim))
            full_var = prior.expand(target.x.shape[0], model.latent_dim).clone()
            full_mean[rows], full_var[rows] = mean_g, var_g
            mean_g, var_g = full_mean, full_var
        mean_e, var_e = encoder_posterior(model, target.y, target.observed, target.context)
        return {"mean_g": mean_g, "var_g": var_g, "mean_e": mean_e, "var_e": var_e,
                "has_own": target.observed.any(1), "in_range": getattr(target, "in_range", None)}

    def _neighbours(self, x: torch.Tensor, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None,
                    rows: torch.Tensor | None = None, stretch: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """The neighbours' GP conditional at locations ``x`` (or at ``x[rows]`` only), with the
        latent lengthscales stretched by ``stretch`` (see :func:`split_mode`)."""
        if rows is not None:
            x = x[rows]
            self_index = None if self_index is None else self_index[rows.cpu().numpy()]
        with stretched(self.model.kernel, stretch):
            return neighbour_posterior(self.model, anchor["x"], anchor["mean"], anchor["var"], x,
                                       neighbours=max(self.config.neighbours, 1), self_index=self_index,
                                       backend=self.config.neighbour_backend,
                                       toward_anchors=bool(self.config.extra.get("latent_cap", True)))

    def _regime_modes(self, mode: str) -> dict[str, str]:
        """The latent source for locations with and without observed values of their own."""
        if mode == "auto":
            chosen = getattr(self, "predict_mode_", None)
            if isinstance(chosen, dict):
                return dict(chosen)
            mode = chosen or "combined"
        unobserved = mode
        if mode in ("encoder", "combined") and not self.model.context_dim:
            unobserved = "neighbours"  # the location-only encoder knows nothing there
        return {"observed": mode, "unobserved": unobserved}

    def _select(self, parts: dict, mode: str | dict) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """The latent posterior of every target under a mode (or per-regime modes).

        Sources: 0 encoder, 1 neighbours (GP conditional), 2 both combined. Locations with
        observed values of their own follow ``modes["observed"]``, the others
        ``modes["unobserved"]``; among the latter, those whose context lies beyond what the
        encoder saw in training (``parts["in_range"]`` False) use the neighbours.
        """
        modes = mode if isinstance(mode, dict) else self._regime_modes(mode)
        has_own = parts["has_own"]
        in_range = parts.get("in_range")
        if in_range is None:
            in_range = torch.ones_like(has_own)
        prior = self.model.kernel.outputscale.detach() * (1.0 + self.model.jitter)
        choice = {
            "encoder": lambda: (parts["mean_e"], parts["var_e"], 0),
            "neighbours": lambda: (parts["mean_g"], parts["var_g"], 1),
            "combined": lambda: (*combine_posteriors(parts["mean_e"], parts["var_e"], parts["mean_g"],
                                                     parts["var_g"], prior), 2),
        }
        mean, var = parts["mean_g"].clone(), parts["var_g"].clone()
        source = np.ones(mean.shape[0], dtype=np.int8)
        for rows, m in ((has_own, modes["observed"]), (~has_own & in_range, modes["unobserved"])):
            if m == "neighbours" or not bool(rows.any()):
                continue
            mc, vc, code = choice[m]()
            sel = rows.unsqueeze(1)
            mean, var = torch.where(sel, mc, mean), torch.where(sel, vc, var)
            source[rows.cpu().numpy()] = code
        return mean, var, source

    def _latent(
        self, target: _Field, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None, mode: str
    ) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """The latent posterior of the targets, the neighbours' computed only where used."""
        modes = self._regime_modes(mode)
        base, stretch = split_mode(modes["unobserved"])
        modes["unobserved"] = base
        uses = {m: m in ("neighbours", "combined") for m in ("encoder", "neighbours", "combined")}
        has_own = target.observed.any(1)
        deep = torch.zeros_like(has_own)  # deep in a gap: their own source (calibration.choose_deep), below
        if modes.get("deep") is not None and self.deep_distance_ is not None and not bool(has_own.all()):
            deep[deep_rows(self, target.x, anchor, torch.nonzero(~has_own).squeeze(1))] = True
        need = (has_own & uses[modes["observed"]]) | (~has_own & uses[base])
        in_range = getattr(target, "in_range", None)
        if in_range is not None:  # beyond the encoder's range the neighbours stand in
            need = need | (~has_own & ~in_range)
        if stretch != 1.0:  # locations without values of their own: the stretched kernel, below
            need = need & has_own
        mean, var, source = self._select(self._sources(target, anchor, self_index, need & ~deep), modes)
        pending = ([(~has_own & ~deep, stretch)] if stretch != 1.0 else []) + (
            [(deep, split_mode(modes["deep"])[1])] if bool(deep.any()) else [])
        for where, factor in pending:
            rows = torch.nonzero(where).squeeze(1)
            if rows.numel():
                mean[rows], var[rows] = stretched_neighbours(self, target.x, anchor, self_index, rows, factor)
                source[rows.cpu().numpy()] = 1
        return mean, var, source

    def _moments(self, mean, var, *, samples, seed, calibrated, has_own=None, visible=None,
                 noise: str | None = None) -> tuple[np.ndarray, ...]:
        """Predictive moments; calibrated with the factors of each location's regime.

        The variance added to the decoded spread is ``noise`` (one of
        :data:`~geogpvae.engine.calibration.NOISES`) for every row, or by default each regime's
        :attr:`noise_`; ``"patterns"`` needs ``visible`` (M, K), the variables seen at each
        target; with ``"scaled"`` the whole predictive variance of that variable is multiplied
        by :attr:`GPVAE.hidden_ratio <geogpvae.engine.model.GPVAE.hidden_ratio>` (before the
        calibration factor, when calibrated).
        """
        own = np.ones(mean.shape[0], dtype=bool) if has_own is None else np.asarray(has_own, dtype=bool)
        choice = {"observed": noise, "unobserved": noise} if noise is not None else self.noise_
        hidden_var, scales = None, [None, None]
        if choice:
            per_regime = [added_variance(self.model, choice.get(r), visible, mean.shape[0]) for r in REGIMES]
            rows = torch.as_tensor(own, device=mean.device).unsqueeze(1)
            hidden_var = torch.where(rows, *per_regime).detach()
            scales = [variance_scale(self.model, choice.get(r)) for r in REGIMES]
        factors = self.calibration_ if calibrated else None
        if factors is None and all(s is None for s in scales):
            return predictive_moments(self.model, mean, var, loc=self.loc, scale=self.scale, log=self.log,
                                      samples=samples, seed=seed, hidden_var=hidden_var)
        factors = None if factors is None else np.atleast_2d(factors)
        out = [np.empty((mean.shape[0], len(self.loc))) for _ in range(4)]
        for regime, rows in ((0, own), (1, ~own)):
            if not rows.any():
                continue
            vf = None if factors is None else factors[min(regime, len(factors) - 1)]
            if scales[regime] is not None:
                vf = scales[regime] if vf is None else vf * scales[regime]
            idx = torch.as_tensor(np.flatnonzero(rows), device=mean.device)
            res = predictive_moments(self.model, mean[idx], var[idx], loc=self.loc, scale=self.scale,
                                     log=self.log, samples=samples, seed=seed, var_factor=vf,
                                     hidden_var=None if hidden_var is None else hidden_var[idx])
            for o, r in zip(out, res):
                o[rows] = r
        return tuple(out)

    # ------------------------------------------------------------------ predict
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

        Returns
        -------
        Prediction
            With ``members > 1``, the mixture of the members' predictions
            (:func:`geogpvae.engine.members.mixture`).
        """
        self._require_fit()
        cfg = self.config
        mode = mode or cfg.predict_mode
        if mode not in ("auto", "encoder", "neighbours", "combined"):
            raise ValueError(f"unknown mode {mode!r}; choose auto, encoder, neighbours or combined")
        samples = samples or cfg.samples
        seed = cfg.seed if seed is None else seed
        self.model.eval()
        if values is not None:
            if x is None:
                raise InputError("values need their coordinates x")
            xq = (check_coordinates(x) - self.x_offset_) * self.x_scale_
            if xq.shape[1] != self.model.n_dims:
                raise InputError(f"coordinates have {xq.shape[1]} dimensions; the model was trained on {self.model.n_dims}")
            vals, observed = self._check_values(values, xq.shape[0])
            y = self._to_model_space(vals, observed)
            check_standardised(y, self.names)
            field = self._make_field(xq, y, observed)
            anchor = self._anchors(field)
            n = xq.shape[0]
            targets, self_index = _rows_of(field), _self_index(anchor, n)
        elif x is None:
            if self._data is None:
                raise RuntimeError(
                    "this engine holds no training field (saved without data): pass x (and values)"
                )
            field = self._training_field()
            anchor, n = self._anchor, field.x.shape[0]
            targets, self_index = _rows_of(field), _self_index(anchor, n)
        else:
            xq = (check_coordinates(x, "new locations") - self.x_offset_) * self.x_scale_
            if xq.shape[1] != self.model.n_dims:
                raise InputError(f"new locations have {xq.shape[1]} dimensions; the model was trained on {self.model.n_dims}")
            if self._anchor is None:
                raise RuntimeError("this engine holds no training field to predict from")
            anchor, self_index, n = self._anchor, None, xq.shape[0]

            def targets(rows: slice) -> _Field:
                return self._new_locations(xq[rows])

        own = self._predict_in_chunks(targets, n, anchor, self_index, mode, samples=samples, seed=seed, calibrated=calibrated)
        return with_members(self, own, x, values, mode=mode, samples=samples, seed=seed, calibrated=calibrated)

    def _predict_in_chunks(self, targets: Callable[[slice], _Field], n: int, anchor: dict,
                           self_index: np.ndarray | None, mode: str, **moments: Any) -> Prediction:
        """Predict ``n`` targets, :data:`PREDICT_CHUNK` at a time, reporting the progress.

        ``targets(rows)`` gives the target field of a slice of rows; ``self_index`` the anchor
        row of each target that is itself an anchor (else -1), or None for new locations.
        Every target is predicted on its own: the chunks change nothing beyond float round-off
        (the decoder sees other batches).
        """
        parts = []
        with Progress(self.progress, n, "prediction", unit="locations") as bar:
            for start in range(0, max(n, 1), PREDICT_CHUNK):
                rows = slice(start, min(start + PREDICT_CHUNK, n))
                target = targets(rows)
                own = None if self_index is None else self_index[rows]
                mean, var, source = self._latent(target, anchor, own, mode)
                has_own = target.observed.any(1).cpu().numpy()
                parts.append((*self._moments(mean, var, has_own=has_own, visible=target.observed, **moments),
                              source))
                bar.update(rows.stop)
        m, s, mm, sm, source = (np.concatenate(p) for p in zip(*parts, strict=True))
        fixed = np.isfinite(self.constant_) if self.constant_ is not None else np.zeros(m.shape[1], bool)
        if fixed.any():  # a constant variable: its value, no spread (the model learnt only noise)
            value = self.constant_[fixed]
            m[:, fixed], mm[:, fixed] = value, [np.log(v) if lg else v for v, lg in zip(value, self.log[fixed])]
            s[:, fixed] = sm[:, fixed] = 0.0
        return Prediction(mean=m, std=s, mean_model=mm, std_model=sm, source=source)

    def _new_locations(self, xq: np.ndarray) -> _Field:
        """A target field at new locations: nothing observed, context from the training field."""
        m, k = xq.shape[0], self.model.n_vars
        ctx = None
        if self.config.context_scales:
            if self._x is None:
                raise RuntimeError("this engine holds no training field to predict from")
            ctx = neighbourhood_context(self._x, self._y, self._observed, self.config.context_scales,
                                        query=xq, backend=self.config.neighbour_backend)
        dev, dt = self.device, self.dtype
        target = _Field(
            torch.as_tensor(xq, dtype=dt, device=dev),
            torch.zeros((m, k), dtype=dt, device=dev),
            torch.zeros((m, k), dtype=torch.bool, device=dev),
            None if ctx is None else torch.as_tensor(ctx, dtype=dt, device=dev),
        )
        if ctx is not None and np.isfinite(self.context_radius_):
            kk = min(max(self.config.context_scales), len(self._x))
            dist, _ = knn(self._x, kk, query=xq, backend=self.config.neighbour_backend)
            target.in_range = torch.as_tensor(dist[:, -1] <= self.context_radius_, device=dev)
        return target

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
            Tensors, NumPy-free plain Python values and nested dicts only
            (:func:`geogpvae.engine.state.engine_state`).
        """
        return engine_state(self, include_data=include_data)

    def checkpoint(self) -> dict[str, Any]:
        """A resumable snapshot: :meth:`state_dict` (without data) plus optimiser and epoch."""
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
        return restore_engine(cls, state, device=device, progress=progress)


def _distributed(model: GPVAE, device: torch.device) -> torch.nn.Module:
    """Wrap the model for data-parallel training when a process group is running.

    Launched under ``torchrun`` or ``srun`` with ``torch.distributed`` initialised (NCCL on
    GPUs, gloo on CPUs), every rank trains on its share of each epoch's mini-batches and the
    gradients are averaged across ranks; with one process the model is returned as it is.
    """
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)
