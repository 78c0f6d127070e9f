"""The names the GP options accept, in a module that imports nothing.

Checking a configuration (:meth:`geogpvae.engine.config.GPVAEConfig.validate`, which
``geogpvae info`` and the command line's option parsing run) needs these lists but not the
kernels or the neighbour search themselves, which import torch: a bad ``--option`` is then
refused, and a file described, without the seconds that import takes.
"""

from __future__ import annotations

__all__ = ["KERNELS", "BACKENDS", "ORDERINGS"]

#: the built-in latent kernels (:mod:`geogpvae.gp.kernels`)
KERNELS = ("rbf", "matern12", "matern32", "matern52", "cauchy")
#: nearest-neighbour backends (:mod:`geogpvae.gp.neighbours`)
BACKENDS = ("auto", "kdtree", "faiss")
#: orderings of the locations for the SPA prior (:mod:`geogpvae.gp.neighbours`)
ORDERINGS = ("random", "maxmin", "sorted", "none")
