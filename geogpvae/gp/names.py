"""The names the GP options accept, in a module that imports nothing.

:meth:`geogpvae.engine.config.GPVAEConfig.validate` checks options against them without importing torch.
"""

from __future__ import annotations

__all__ = ["KERNELS", "BACKENDS", "ORDERINGS"]

#: the built-in latent kernels (:mod:`geogpvae.gp.kernels`)
KERNELS = ("rbf", "matern12", "matern32", "matern52", "cauchy")
#: nearest-neighbour backends (:mod:`geogpvae.gp.neighbours`)
BACKENDS = ("auto", "kdtree", "faiss")
#: orderings of the locations for the SPA prior (:mod:`geogpvae.gp.neighbours`)
ORDERINGS = ("random", "maxmin", "sorted", "none")
