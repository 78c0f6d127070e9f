"""``python -m geogpvae ...``: the same as the ``geogpvae`` command (see :mod:`geogpvae.cli`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
