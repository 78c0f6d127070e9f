"""The KL terms of the two neighbour-driven priors, one small class each.

:class:`~geogpvae.gp.priors.spa.SPAPrior` (Vecchia: appendix B.2) and
:class:`~geogpvae.gp.priors.hpa.HPAPrior` (hierarchical: appendix B.1) share one contract:
``prior.kl(kernel, batch, mean, var, jitter)``, the KL per location of a mini-batch (a scalar
the ELBO weighs by beta). :data:`PRIORS` maps the engine kind to its prior.
"""

from __future__ import annotations

from .hpa import HPAPrior
from .spa import SPAPrior

__all__ = ["HPAPrior", "PRIORS", "SPAPrior"]

#: engine kind -> its prior
PRIORS = {"spa": SPAPrior(), "hpa": HPAPrior()}
