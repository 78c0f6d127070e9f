"""Sphinx configuration of the geogpvae documentation.

Build (from the repository root, after ``pip install -e ".[docs,cpu]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The gallery (``docs/examples/*.py``) is executed during the build with few epochs and one
CPU thread; the API reference is generated from the docstrings of every public module.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GEOGPVAE_DOCS_QUICK", "1")
if "GEOGPVAE_DATA_DIR" not in os.environ and (ROOT.parent / "shared" / "datasets").is_dir():
    os.environ["GEOGPVAE_DATA_DIR"] = str(ROOT.parent / "shared" / "datasets")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import geogpvae  # noqa: E402

project = "geogpvae"
author = "geogpvae developers"
copyright = "geogpvae developers, BSD-3-Clause"
release = geogpvae.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
# (sphinx-gallery writes a notebook beside each example page: a download, not a page)
exclude_patterns = ["_build", "slurm", "examples/README.txt", "**.ipynb_checkpoints", "auto_examples/*.ipynb"]
templates_path = ["_templates"]

# --- the worked notebooks, rendered with the outputs stored in them (never executed here: they
# need the Jura and SPE10 files); copied from notebooks/ because Sphinx reads only docs/
nb_execution_mode = "off"
(ROOT / "docs" / "notebooks").mkdir(exist_ok=True)
for _nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copyfile(_nb, ROOT / "docs" / "notebooks" / _nb.name)

# --- MyST: the Markdown pages are also read on GitHub, so keep to plain CommonMark + these
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# --- API reference from the docstrings (numpydoc style, read by napoleon)
autosummary_generate = True
autosummary_ignore_module_all = True  # what a module defines without a leading underscore
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True
napoleon_use_rtype = False
napoleon_preprocess_types = False

# --- doctests: the examples of these pages (``-b doctest``; the docstrings' examples run under
# ``pytest --doctest-modules geogpvae``); files they write go to a temporary folder
doctest_global_setup = """
import os, tempfile
os.chdir(tempfile.mkdtemp(prefix="geogpvae-doctest-"))
import matplotlib
matplotlib.use("Agg")
import warnings  # the pages' examples train a few epochs on purpose
from geogpvae.errors import TrainingWarning
warnings.simplefilter("ignore", TrainingWarning)
"""
doctest_test_doctest_blocks = ""

# --- links to the libraries the API pages name (numpy, xarray, torch, ...). Where the
# inventories cannot be fetched (an offline build), the pages build without those links: the
# failure is reported as a notice, not as a warning that ``-W`` would turn into an error.
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
    "xarray": ("https://docs.xarray.dev/en/stable", None),
    "torch": ("https://docs.pytorch.org/docs/stable", None),
    "dask": ("https://docs.dask.org/en/stable", None),
    "matplotlib": ("https://matplotlib.org/stable", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
}
intersphinx_timeout = 10
UNREACHABLE_INVENTORY = "failed to reach any of the inventories"

nitpicky = False
suppress_warnings = ["config.cache"]

# --- gallery: short scripts, executed at build time
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "show_memory": False,
    "image_scrapers": ("matplotlib",),
}

# --- HTML
html_theme = "furo"
html_title = f"geogpvae {release}"
html_static_path: list[str] = []


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """Leave out the ``set_*_request`` methods scikit-learn adds to every estimator class."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


class _InventoryUnreachable(logging.Filter):
    """Report an intersphinx inventory that cannot be fetched as a notice, not a warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith(UNREACHABLE_INVENTORY):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = "built without these links (offline?): " + str(record.msg)
        return True


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
    for name in ("sphinx.sphinx.ext.intersphinx", "sphinx.sphinx.ext.intersphinx._load"):  # Sphinx 8, 9
        logging.getLogger(name).addFilter(_InventoryUnreachable())
