"""Posterior predictive of a trained GPVAE: latent posteriors, then the decoder's moments.

Latent posteriors come from the encoder ``q(z | y)``, the neighbours (:func:`neighbour_posterior`,
paper section 3.3) or both (:func:`combine_posteriors`). :func:`predictive_moments` decodes S
draws of z: mean of the decoded means, their variance plus the added variance; in log space
``E[y] = mean_s exp(m_s + v/2)`` and ``E[y^2] = mean_s exp(2 m_s + 2 v)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..gp.neighbours import distinct_offsets, knn
from ..gp.priors.spa import spa_conditional
from .model import GPVAE

__all__ = ["added_variance", "combine_posteriors", "encoder_posterior", "neighbour_posterior", "predictive_moments",
           "pseudo_observations", "variance_scale"]


@torch.no_grad()
def encoder_posterior(
    model: GPVAE,
    y: torch.Tensor,
    visible: torch.Tensor,
    context: torch.Tensor | None,
    *,
    chunk: int = 65536,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder means and variances of many locations, shape (M, L) each."""
    # outputs filled in place (see predictive_moments: per-chunk pieces fragment the heap)
    means = y.new_empty((y.shape[0], model.latent_dim))
    variances = y.new_empty((y.shape[0], model.latent_dim))
    for s in range(0, y.shape[0], chunk):
        m, v = model.encode(y[s : s + chunk], visible[s : s + chunk], None if context is None else context[s : s + chunk])
        means[s : s + chunk], variances[s : s + chunk] = m, v
    return means, variances


@torch.no_grad()
def neighbour_posterior(
    model: GPVAE,
    x_anchor: torch.Tensor,
    mean_anchor: torch.Tensor,
    var_anchor: torch.Tensor,
    x_target: torch.Tensor,
    *,
    neighbours: int,
    self_index: np.ndarray | None = None,
    backend: str = "auto",
    chunk: int = 16384,
    toward_anchors: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Latent posterior at target locations from their H nearest anchors.

    Per channel, GP regression on the anchors' pseudo-observations ``u``, ``E`` (:func:`pseudo_observations`):
    ``q(z_*) = N(k_*n (K_nn + E)^{-1} u_n, k_** - k_*n (K_nn + E)^{-1} k_n*)``.

    Parameters
    ----------
    model : GPVAE
    x_anchor : Tensor, shape (A, D)
        Locations whose encoder posterior is known (the observed ones).
    mean_anchor, var_anchor : Tensor, shape (A, L)
    x_target : Tensor, shape (M, D)
    neighbours : int
        H.
    self_index : array of int, shape (M,), optional
        Each target's own anchor row (else -1), left out of its neighbour set.
    backend : str
    toward_anchors : bool
        Relax to the anchors' mean and total variance (per channel) far from them, not the prior.

    Returns
    -------
    mean, var : Tensor, shape (M, L)
    """
    m, a = x_target.shape[0], x_anchor.shape[0]
    h = min(neighbours, a)
    prior_var = model.kernel.outputscale * (1.0 + model.jitter)
    if h <= 0 or m == 0:
        return (
            x_target.new_zeros((m, model.latent_dim)),
            prior_var.expand(m, model.latent_dim).clone(),
        )
    xa = x_anchor.detach().cpu().double().numpy()
    xt = x_target.detach().cpu().double().numpy()
    # one spare candidate, so that a target that is itself an anchor still gets h others
    kq = min(h + 1, a) if self_index is not None else h
    _, idx = knn(xa, kq, query=xt, backend=backend)
    if kq > h or self_index is not None:
        is_self = np.zeros_like(idx, dtype=bool) if self_index is None else idx == np.asarray(self_index)[:, None]
        if kq == h:  # every anchor is a candidate: drop the target itself, pad with -1
            idx = np.where(is_self, -1, idx)
            idx = np.take_along_axis(idx, np.argsort(idx < 0, axis=1, kind="stable"), axis=1)
        else:
            drop = np.where(is_self.any(1), is_self.argmax(1), kq - 1)
            keep = np.ones_like(idx, dtype=bool)
            keep[np.arange(m), drop] = False
            idx = idx[keep].reshape(m, h)
    idx_t = torch.as_tensor(idx, device=x_anchor.device)
    pseudo, noise = pseudo_observations(mean_anchor, var_anchor, prior_var)
    means = mean_anchor.new_empty((m, model.latent_dim))
    variances = mean_anchor.new_empty((m, model.latent_dim))
    tabulate = True  # until a chunk shows the offsets too varied (scattered points)
    centre = mean_anchor.mean(0) if toward_anchors else None  # the anchors' mean, per channel
    for s in range(0, m, chunk):
        nb = idx_t[s : s + chunk]
        valid = nb >= 0
        safe = nb.clamp_min(0)
        blocks = _tabulated_blocks(model.kernel, xa, xt[s : s + chunk], idx[s : s + chunk], x_anchor) if tabulate else None
        tabulate = blocks is not None
        w, cond_var = spa_conditional(model.kernel, x_target[s : s + chunk], x_anchor[safe], valid, model.jitter,
                                      nbr_noise=noise[safe].mT, kernel_blocks=blocks)  # (B, L, H), (B, L)
        means[s : s + chunk] = (w * pseudo[safe].mT).sum(-1)
        if toward_anchors:  # the weight the neighbours leave goes to the anchors' mean
            means[s : s + chunk] += (1.0 - w.sum(-1)) * centre
        variances[s : s + chunk] = cond_var
    if toward_anchors and a > 1:
        variances = torch.minimum(variances, mean_anchor.var(0) + var_anchor.mean(0))
    return means, variances


def _tabulated_blocks(kernel, xa: np.ndarray, xt: np.ndarray, idx: np.ndarray, like: torch.Tensor) -> torch.Tensor | None:
    """Kernel blocks (M, L, H+1, H+1) of the targets' neighbour sets (target last), from a table of
    their distinct offsets; None when the offsets are too varied to tabulate (scattered points)."""
    found = distinct_offsets(xa, idx, xt)
    if found is None:
        return None
    offsets, ids = found
    table = kernel.blocks(torch.as_tensor(offsets, dtype=like.dtype, device=like.device))  # (L, U, U)
    ids_t = torch.as_tensor(ids, device=like.device)
    pair = ids_t[:, :, None] * offsets.shape[0] + ids_t[:, None, :]  # (M, H+1, H+1)
    return table.reshape(table.shape[0], -1)[:, pair].movedim(0, 1)


def pseudo_observations(
    mean: torch.Tensor, var: torch.Tensor, prior_var: torch.Tensor, *, floor: float = 0.01
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Gaussian likelihood of z that an encoder posterior adds to the marginal prior.

    ``N(mean, var) = N(0, prior_var) x N(u; z, e) / const``: ``1/e = f / var``, ``u = mean / f``,
    ``f = 1 - var / prior_var``. Below ``f = floor`` the natural mean ``u / e`` shrinks linearly
    to 0; ``f`` is floored at ``floor**2`` in the precision.

    Parameters
    ----------
    mean, var : Tensor, shape (A, L)
    prior_var : Tensor, shape (L,)
    floor : float

    Returns
    -------
    u, e : Tensor, shape (A, L)
    """
    f = 1.0 - var / prior_var
    precision = torch.clamp(f, min=floor * floor) / var
    natural = mean / var * torch.clamp(f / floor, 0.0, 1.0)
    return natural / precision, 1.0 / precision


def combine_posteriors(
    mean_enc: torch.Tensor,
    var_enc: torch.Tensor,
    mean_nbr: torch.Tensor,
    var_nbr: torch.Tensor,
    prior_var: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fuse encoder and neighbour posteriors, counting the prior marginal once.

    Parameters
    ----------
    mean_enc, var_enc, mean_nbr, var_nbr : Tensor, shape (M, L)
    prior_var : Tensor, shape (L,)
        Marginal prior variance of each channel.

    Returns
    -------
    mean, var : Tensor, shape (M, L)
    """
    # the neighbours can only add information: cap their variance at the prior's
    var_nbr = torch.minimum(var_nbr, prior_var)
    precision = 1.0 / var_enc + 1.0 / var_nbr - 1.0 / prior_var
    precision = torch.maximum(precision, 1.0 / var_enc)
    var = 1.0 / precision
    mean = var * (mean_enc / var_enc + mean_nbr / var_nbr)
    return mean, var


def _decode(model: GPVAE, z: torch.Tensor) -> torch.Tensor:
    """``model.decode(z)`` without a gradient, its ReLUs in place (the same numbers, less memory traffic)."""
    if type(model).decode is not GPVAE.decode or not isinstance(model.decoder, torch.nn.Sequential):
        return model.decode(z)  # a decoder of its own
    for i, layer in enumerate(model.decoder):  # (never in place on the caller's z)
        z = z.relu_() if i > 0 and isinstance(layer, torch.nn.ReLU) else layer(z)
    return z


@torch.no_grad()
def predictive_moments(
    model: GPVAE,
    mean: torch.Tensor,
    var: torch.Tensor,
    *,
    loc: np.ndarray,
    scale: np.ndarray,
    log: np.ndarray,
    samples: int,
    seed: int = 0,
    var_factor: np.ndarray | None = None,
    chunk: int = 4096,
    hidden_var: torch.Tensor | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Predictive mean and standard deviation of every variable, in its original units.

    Parameters
    ----------
    model : GPVAE
    mean, var : Tensor, shape (M, L)
        Latent posterior of each location.
    loc, scale : array, shape (K,)
        Standardisation: modelled value = loc + scale * standardised value.
    log : array of bool, shape (K,)
        Variables modelled in log space (returned as ``exp`` of it).
    samples : int
        Monte Carlo samples of z per location.
    seed : int
    var_factor : array, shape (K,), optional
        Calibration: each variable's modelled predictive variance is multiplied by it.
    hidden_var : Tensor, shape (M, K), optional
        Variance added to the decoded spread (standardised units), e.g. :meth:`GPVAE.hidden_var_at`;
        default the likelihood variance :attr:`GPVAE.noise_var`.

    Returns
    -------
    mean, std : ndarray, shape (M, K)
        In original units.
    mean_model, std_model : ndarray, shape (M, K)
        The Gaussian mixture's moments in modelled (log for log variables), unstandardised units.
    """
    gen = torch.Generator(device=mean.device).manual_seed(int(seed))
    # units whose variances leave float64's range: computed in a power of two of them, exact
    unit = _power_of_two_units(scale, log)
    loc, scale = np.asarray(loc) / unit, np.asarray(scale) / unit
    # float64 moments: exp() of log-space mixtures overflows float32 long before
    f64 = torch.float64
    loc_t = torch.as_tensor(loc, dtype=f64, device=mean.device)
    scale_t = torch.as_tensor(scale, dtype=f64, device=mean.device)
    log_t = torch.as_tensor(np.asarray(log, dtype=bool), device=mean.device)
    noise = model.noise_var.detach().to(f64) * scale_t.square()  # modelled units, a value not seen
    if hidden_var is not None:
        if hidden_var.shape != (mean.shape[0], len(loc)):
            raise ValueError(f"hidden_var has shape {tuple(hidden_var.shape)}; expected {(mean.shape[0], len(loc))}")
        noise = hidden_var.detach().to(f64) * scale_t.square()  # (M, K)
    factor = None
    if var_factor is not None:
        factor = torch.as_tensor(np.asarray(var_factor), dtype=f64, device=mean.device)
        noise = noise * factor
    # the same S draws at every location: no speckle in maps, independent of order and chunking
    eps = torch.randn((samples, 1, mean.shape[-1]), generator=gen, dtype=mean.dtype, device=mean.device)
    # filled in place: small per-chunk results between large decoder buffers fragment the heap
    out = tuple(np.empty((mean.shape[0], len(loc))) for _ in range(4))
    for s in range(0, mean.shape[0], chunk):
        mu, v = mean[s : s + chunk], var[s : s + chunk]
        dec = _decode(model, mu + v.sqrt() * eps).to(f64)  # (S, B, K) standardised
        comp = loc_t + scale_t * dec  # component means, modelled units
        m_model = comp.mean(0)
        if factor is not None:
            comp = m_model + factor.sqrt() * (comp - m_model)
        nz = noise if noise.dim() == 1 else noise[s : s + chunk]
        v_model = comp.var(0, unbiased=False) + nz
        m_out, sd_out = m_model.clone(), v_model.sqrt()
        if bool(log_t.any()):
            # moments of exp(mixture of N(comp_s, noise)), computed in log space for stability
            log_m1 = torch.logsumexp(comp + 0.5 * nz, 0) - math.log(samples)
            log_m2 = torch.logsumexp(2.0 * comp + 2.0 * nz, 0) - math.log(samples)
            # E[y^2] - E[y]^2 without cancellation: E[y]^2 (exp(log E[y^2] - 2 log E[y]) - 1),
            # its square root taken in log space (tiny values' variances underflow)
            log_sd = log_m1 + 0.5 * torch.log(torch.expm1(torch.clamp(log_m2 - 2.0 * log_m1, min=0.0)))
            m_out = torch.where(log_t, torch.exp(log_m1), m_out)
            sd_out = torch.where(log_t, torch.exp(log_sd), sd_out)
        for dest, t in zip(out, (m_out, sd_out, m_model, v_model.sqrt())):
            dest[s : s + chunk] = t.cpu().numpy()
    for part in out:
        part *= unit
    return out  # type: ignore[return-value]


def added_variance(model: GPVAE, kind: str | list[str] | None, visible: torch.Tensor | None, n: int) -> torch.Tensor:
    """The variance added to the decoded spread of ``n`` targets, in standardised units.

    Parameters
    ----------
    model : GPVAE
    kind : str, list of str or None
        One of :data:`~geogpvae.engine.calibration.NOISES`, for all or per variable; None: the likelihood's.
    visible : Tensor of bool, shape (n, K), optional
        The variables seen at each target; needed for ``"patterns"``.
    n : int

    Returns
    -------
    Tensor, shape (n, K)
    """
    kinds = kind if isinstance(kind, (list, tuple)) else [kind] * model.n_vars
    if "patterns" in kinds and visible is None:
        raise ValueError("pattern variances need the variables seen at each target")
    table = {"likelihood": model.noise_var, "scaled": model.noise_var, "hidden": model.hidden_estimate,
             None: model.noise_var}
    cols = {c: (model.hidden_var_at(visible) if c == "patterns" else table[c].expand(n, -1)) for c in set(kinds)}
    if len(cols) == 1:
        return cols[kinds[0]]
    return torch.stack([cols[c][:, j] for j, c in enumerate(kinds)], dim=1)


def variance_scale(model: GPVAE, kind: str | list[str] | None) -> np.ndarray | None:
    """Per variable, the factor on the whole predictive variance that ``kind`` implies.

    Parameters
    ----------
    model : GPVAE
    kind : str, list of str or None
        As for :func:`added_variance`.

    Returns
    -------
    ndarray, shape (K,), or None
        ``model.hidden_ratio`` where the kind is ``"scaled"``, else 1; None when none is scaled.
    """
    kinds = kind if isinstance(kind, (list, tuple)) else [kind] * model.n_vars
    if "scaled" not in kinds:
        return None
    ratio = model.hidden_ratio.detach().cpu().double().numpy()
    return np.where(np.asarray(kinds, dtype=object) == "scaled", ratio, 1.0)


def _power_of_two_units(scale: np.ndarray, log: np.ndarray) -> np.ndarray:
    """Per variable, the power of two nearest its standardisation scale where that lies outside
    1e-100..1e100 (squares would leave float64's range), else 1; 1 for log-modelled variables."""
    scale = np.asarray(scale, dtype=np.float64)
    unit = np.exp2(np.round(np.log2(scale)))
    far = (np.abs(np.log10(scale)) > 100) & ~np.asarray(log, dtype=bool)
    return np.where(far, unit, 1.0)
