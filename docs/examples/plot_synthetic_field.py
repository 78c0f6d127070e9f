"""
A synthetic field: impute, map and check the uncertainty
========================================================

Half of the values of a three-variable Gaussian-process field are hidden, imputed with the
default SPA engine, and compared with the truth: a map of the filled field beside its
predictive standard deviation, then the calibration of that standard deviation.
"""

import os
import warnings

import geogpvae
import geogpvae.errors
import geogpvae.plot
from geogpvae.datasets import make_gaussian_field

QUICK = os.environ.get("GEOGPVAE_DOCS_QUICK") == "1"  # set by the documentation build
EPOCHS = 30 if QUICK else None  # None: the package default
if QUICK:  # the build's short budget is on purpose: its TrainingWarning would only repeat that
    warnings.simplefilter("ignore", geogpvae.errors.TrainingWarning)

ds, truth = make_gaussian_field((40, 40), n_vars=3, missing=0.5, seed=0, return_truth=True)
out = geogpvae.impute(ds, neighbours=20, epochs=EPOCHS, progress=False)
print(out.attrs["history"])

# %%
# The filled field and its predictive standard deviation. Observed cells have a standard
# deviation of 0; the imputed ones are uncertain where the observations are sparse.
fig = geogpvae.plot.field_map(out, "v0", truth=truth)

# %%
# Calibration: the absolute error against the predictive standard deviation, and how often
# the truth falls inside central intervals of the predictive distribution.
fig = geogpvae.plot.uncertainty(out, "v0", truth=truth)

# %%
# Do the errors hang together in space? The semivariogram of the standardized residuals at the
# imputed cells: flat at 1 for calibrated, independent errors. Here it starts low and rises,
# because the cells of one gap share their nearest observations and so their errors.
fig = geogpvae.plot.residual_variogram(out, "v0", truth)
