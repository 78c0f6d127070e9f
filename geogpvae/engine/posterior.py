"""From a trained model to predictions: latent posteriors at targets and their predictive moments.

A :class:`Posterior` holds what a fitted engine predicts with and gives, at target locations,
each latent source's posterior (encoder, neighbours' GP conditional, both combined, stretched
neighbours) and the predictive moments in the original units.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from ..gp.kernels import stretched
from ..gp.neighbours import knn
from .config import GPVAEConfig
from .model import GPVAE
from .predict import (
    added_variance,
    combine_posteriors,
    encoder_posterior,
    neighbour_posterior,
    predictive_moments,
    variance_scale,
)
from .targets import Targets
from .data import context_index, neighbourhood_context

__all__ = ["Posterior", "Prediction", "REGIMES", "split_mode"]

#: the two calibration regimes: locations with observed values of their own, and without
REGIMES = ("observed", "unobserved")


def split_mode(mode: str) -> tuple[str, float]:
    """A latent source and its lengthscale stretch: ``"neighbours*2"`` -> ``("neighbours", 2.0)``."""
    base, _, factor = mode.partition("*")
    return base, float(factor) if factor else 1.0


@dataclass
class Prediction:
    """Predictive moments at a set of locations.

    Attributes
    ----------
    mean, std : ndarray, shape (M, K)
        Predictive mean and standard deviation in the original units (for log-modelled
        variables, of the back-transformed log-normal mixture).
    mean_model, std_model : ndarray, shape (M, K)
        The same in the modelled space (the log, for log-modelled variables).
    source : ndarray of int8, shape (M,)
        Where each latent posterior came from: 0 encoder, 1 neighbours, 2 both combined.

    Notes
    -----
    A variable whose observed values (at least
    :data:`~geogpvae.engine.core.MIN_CONSTANT_VALUES`) are all equal is predicted as that
    value everywhere, with standard deviation 0.
    """

    mean: np.ndarray
    std: np.ndarray
    mean_model: np.ndarray
    std_model: np.ndarray
    source: np.ndarray

    def take(self, rows: np.ndarray) -> Prediction:
        """The prediction at ``rows`` (int indices of locations, shape (M,); repeats allowed)."""
        return Prediction(*(getattr(self, f.name)[rows] for f in dataclasses.fields(self)))


@dataclass
class Posterior:
    """The posterior machinery of a trained model.

    Attributes
    ----------
    model : GPVAE
        The trained model (in evaluation mode while predicting).
    config : GPVAEConfig
    loc, scale : ndarray, shape (K,)
        Standardisation of the modelled values.
    log : ndarray of bool, shape (K,)
        Variables modelled in log space.
    train_x, train_y : ndarray, shape (N, D) and (N, K)
        The training field in model units (standardised values, 0 where not observed).
    train_observed : ndarray of bool, shape (N, K)
    context_index : ndarray of int, optional
        The context neighbours of ``train_x`` (reused for fields at those locations).
    context_radius : float
        Beyond it from the training locations the encoder's context is not trusted.
    predict_mode : str, dict or None
        Calibration's choice of latent source per regime (``predict_mode="auto"``).
    noise : dict
        Per regime, the variance added to each variable's decoded spread (empty: the model's).
    calibration : ndarray, shape (2, K), optional
        Variance factors of the two regimes.
    deep_distance : float, optional
        Beyond it from the data a target lies deep in a gap (where gaps cluster).
    clustered : ndarray of bool, shape (K,)
        Variables whose gaps cluster.
    device, dtype
        Where and in which type the model's tensors live.
    """

    model: GPVAE
    config: GPVAEConfig
    loc: np.ndarray
    scale: np.ndarray
    log: np.ndarray
    train_x: np.ndarray | None = None
    train_y: np.ndarray | None = None
    train_observed: np.ndarray | None = None
    context_index: np.ndarray | None = None
    context_radius: float = float("inf")
    predict_mode: str | dict | None = None
    noise: dict[str, list[str]] = field(default_factory=dict)
    calibration: np.ndarray | None = None
    deep_distance: float | None = None
    clustered: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32

    def replace(self, **changes) -> Posterior:
        """A copy with some attributes changed."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ targets
    def field(self, x: np.ndarray, y: np.ndarray, observed: np.ndarray) -> Targets:
        """A field of targets as tensors, with its context (from itself)."""
        cfg = self.config
        ctx = None
        if cfg.context_scales:
            index = None
            if x is self.train_x:  # the training locations: their context neighbours are kept
                index = self.context_index
                if index is None:
                    index = context_index(x, cfg.context_scales, backend=cfg.neighbour_backend)
            ctx = neighbourhood_context(x, y, observed, cfg.context_scales, backend=cfg.neighbour_backend,
                                        index=index)

        def t(a, dt=self.dtype):
            return torch.as_tensor(np.ascontiguousarray(a)).to(device=self.device, dtype=dt)

        return Targets(t(x), t(y), t(observed, torch.bool), None if ctx is None else t(ctx))

    def new_locations(self, xq: np.ndarray) -> Targets:
        """A target field at new locations: nothing observed, context from the training field."""
        m, k = xq.shape[0], self.model.n_vars
        cfg = self.config
        ctx = None
        if cfg.context_scales:
            if self.train_x is None:
                raise RuntimeError("this engine holds no training field to predict from")
            ctx = neighbourhood_context(self.train_x, self.train_y, self.train_observed, cfg.context_scales,
                                        query=xq, backend=cfg.neighbour_backend)
        dev, dt = self.device, self.dtype
        target = Targets(
            torch.as_tensor(xq, dtype=dt, device=dev),
            torch.zeros((m, k), dtype=dt, device=dev),
            torch.zeros((m, k), dtype=torch.bool, device=dev),
            None if ctx is None else torch.as_tensor(ctx, dtype=dt, device=dev),
        )
        if ctx is not None and np.isfinite(self.context_radius):
            kk = min(max(cfg.context_scales), len(self.train_x))
            dist, _ = knn(self.train_x, kk, query=xq, backend=cfg.neighbour_backend)
            target.in_range = torch.as_tensor(dist[:, -1] <= self.context_radius, device=dev)
        return target

    # ------------------------------------------------------------------ latent posteriors
    @torch.no_grad()
    def anchors(self, field: Targets) -> dict[str, torch.Tensor]:
        """Encoder posterior of every location of ``field`` that has an observed value."""
        self.model.eval()
        mean, var = encoder_posterior(self.model, field.y, field.observed, field.context)
        has_obs = field.observed.any(1)
        return {"x": field.x[has_obs], "mean": mean[has_obs], "var": var[has_obs],
                "index": torch.nonzero(has_obs).squeeze(1)}

    @torch.no_grad()
    def sources(self, target: Targets, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None,
                need: torch.Tensor | None = None) -> dict:
        """Both latent posteriors at the targets; the neighbours' only where ``need`` (bool (M,)),
        the prior elsewhere."""
        model = self.model
        rows = None if need is None or bool(need.all()) else torch.nonzero(need).squeeze(1)
        mean_g, var_g = self.neighbours(target.x, anchor, self_index, rows)
        if rows is not None:
            prior = (model.kernel.outputscale * (1.0 + model.jitter)).detach().to(mean_g.dtype)
            full_mean = mean_g.new_zeros((target.x.shape[0], model.latent_dim))
            full_var = prior.expand(target.x.shape[0], model.latent_dim).clone()
            full_mean[rows], full_var[rows] = mean_g, var_g
            mean_g, var_g = full_mean, full_var
        mean_e, var_e = encoder_posterior(model, target.y, target.observed, target.context)
        return {"mean_g": mean_g, "var_g": var_g, "mean_e": mean_e, "var_e": var_e,
                "has_own": target.observed.any(1), "in_range": getattr(target, "in_range", None)}

    def neighbours(self, x: torch.Tensor, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None,
                   rows: torch.Tensor | None = None, stretch: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """The neighbours' GP conditional at locations ``x`` (or at ``x[rows]`` only), with the
        latent lengthscales stretched by ``stretch`` (see :func:`split_mode`)."""
        if rows is not None:
            x = x[rows]
            self_index = None if self_index is None else self_index[rows.cpu().numpy()]
        with stretched(self.model.kernel, stretch):
            return neighbour_posterior(self.model, anchor["x"], anchor["mean"], anchor["var"], x,
                                       neighbours=max(self.config.neighbours, 1), self_index=self_index,
                                       backend=self.config.neighbour_backend, toward_anchors=True)

    def stretched_neighbours(
        self, x: torch.Tensor, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None,
        rows: torch.Tensor, stretch: float, learnt_var: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The stretched source ``"neighbours*F"`` at ``x[rows]``: the stretched conditional's mean;
        its variance, or where gaps cluster the learnt kernel's (``learnt_var`` if computed)."""
        mean, var = self.neighbours(x, anchor, self_index, rows, stretch)
        if np.any(self.clustered):
            var = learnt_var if learnt_var is not None else self.neighbours(x, anchor, self_index, rows)[1]
        return mean, var

    def deep_rows(self, x: torch.Tensor, anchor: dict[str, torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
        """The targets ``rows`` (of ``x``, shape (M, D)) farther than :attr:`deep_distance`
        from every anchor: deep in a gap."""
        if rows.numel() == 0 or anchor["x"].shape[0] == 0:
            return rows
        dist, _ = knn(anchor["x"].detach().cpu().double().numpy(), 1, query=x[rows].detach().cpu().double().numpy(),
                      backend=self.config.neighbour_backend)
        return rows[torch.as_tensor(dist[:, 0] > self.deep_distance, device=rows.device)]

    def regime_modes(self, mode: str) -> dict[str, str]:
        """The latent source for locations with and without observed values of their own."""
        if mode == "auto":
            if isinstance(self.predict_mode, dict):
                return dict(self.predict_mode)
            mode = self.predict_mode or "combined"
        unobserved = mode
        if mode in ("encoder", "combined") and not self.model.context_dim:
            unobserved = "neighbours"  # the location-only encoder knows nothing there
        return {"observed": mode, "unobserved": unobserved}

    def select(self, parts: dict, mode: str | dict) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """Every target's latent posterior and source (0 encoder, 1 neighbours, 2 combined) under a
        mode or per-regime modes; unobserved targets beyond the encoder's range use the neighbours."""
        modes = mode if isinstance(mode, dict) else self.regime_modes(mode)
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

    def latent(
        self, target: Targets, anchor: dict[str, torch.Tensor], self_index: np.ndarray | None, mode: str
    ) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """The latent posterior of the targets, the neighbours' computed only where used."""
        modes = self.regime_modes(mode)
        base, stretch = split_mode(modes["unobserved"])
        modes["unobserved"] = base
        uses = {m: m in ("neighbours", "combined") for m in ("encoder", "neighbours", "combined")}
        has_own = target.observed.any(1)
        deep = torch.zeros_like(has_own)  # deep in a gap: their own source (calibration.choose_deep), below
        if modes.get("deep") is not None and self.deep_distance is not None and not bool(has_own.all()):
            deep[self.deep_rows(target.x, anchor, torch.nonzero(~has_own).squeeze(1))] = True
        need = (has_own & uses[modes["observed"]]) | (~has_own & uses[base])
        in_range = getattr(target, "in_range", None)
        if in_range is not None:  # beyond the encoder's range the neighbours stand in
            need = need | (~has_own & ~in_range)
        if stretch != 1.0:  # locations without values of their own: the stretched kernel, below
            need = need & has_own
        mean, var, source = self.select(self.sources(target, anchor, self_index, need & ~deep), modes)
        pending = ([(~has_own & ~deep, stretch)] if stretch != 1.0 else []) + (
            [(deep, split_mode(modes["deep"])[1])] if bool(deep.any()) else [])
        for where, factor in pending:
            rows = torch.nonzero(where).squeeze(1)
            if rows.numel():
                mean[rows], var[rows] = self.stretched_neighbours(target.x, anchor, self_index, rows, factor)
                source[rows.cpu().numpy()] = 1
        return mean, var, source

    # ------------------------------------------------------------------ predictive moments
    def added_terms(self, own: np.ndarray, visible: torch.Tensor | None, noise: str | None = None
                    ) -> tuple[torch.Tensor | None, list[np.ndarray | None]]:
        """The variance added to the decoded spread at each target ((M, K), standardised units;
        None: the likelihood's) and each regime's factor on the whole variance ((K,) or None), for
        targets with (``own``, bool (M,)) and without observed values of their own."""
        choice = {"observed": noise, "unobserved": noise} if noise is not None else self.noise
        if not choice:
            return None, [None, None]
        m = len(own)
        per_regime = [added_variance(self.model, choice.get(r), visible, m) for r in REGIMES]
        rows = torch.as_tensor(own, device=per_regime[0].device).unsqueeze(1)
        return torch.where(rows, *per_regime).detach(), [variance_scale(self.model, choice.get(r)) for r in REGIMES]

    @staticmethod
    def regime_factor(regime: int, factors: np.ndarray | None, scales: list[np.ndarray | None]) -> np.ndarray | None:
        """The factor on regime ``regime``'s predictive variance ((K,) or None): calibration's
        ``factors`` (2-D, one row per regime) times the regime's scale."""
        vf = None if factors is None else factors[min(regime, len(factors) - 1)]
        if scales[regime] is not None:
            vf = scales[regime] if vf is None else vf * scales[regime]
        return vf

    def moments(self, mean, var, *, samples, seed, calibrated, has_own=None, visible=None,
                noise: str | None = None) -> tuple[np.ndarray, ...]:
        """Predictive moments, calibrated per regime; the added variance is ``noise`` (one of
        :data:`~geogpvae.engine.calibration.NOISES`) or each regime's :attr:`noise`
        (``"patterns"`` needs ``visible`` (M, K))."""
        own = np.ones(mean.shape[0], dtype=bool) if has_own is None else np.asarray(has_own, dtype=bool)
        hidden_var, scales = self.added_terms(own, visible, noise)
        factors = self.calibration if calibrated else None
        if factors is None and all(s is None for s in scales):
            return predictive_moments(self.model, mean, var, loc=self.loc, scale=self.scale, log=self.log,
                                      samples=samples, seed=seed, hidden_var=hidden_var)
        factors = None if factors is None else np.atleast_2d(factors)
        out = [np.empty((mean.shape[0], len(self.loc))) for _ in range(4)]
        for regime, rows in ((0, own), (1, ~own)):
            if not rows.any():
                continue
            vf = self.regime_factor(regime, factors, scales)
            idx = torch.as_tensor(np.flatnonzero(rows), device=mean.device)
            res = predictive_moments(self.model, mean[idx], var[idx], loc=self.loc, scale=self.scale,
                                     log=self.log, samples=samples, seed=seed, var_factor=vf,
                                     hidden_var=None if hidden_var is None else hidden_var[idx])
            for o, r in zip(out, res):
                o[rows] = r
        return tuple(out)
