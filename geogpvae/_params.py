"""The scikit-learn parameter contract without scikit-learn: ``get_params``/``set_params`` read
the keyword arguments of ``__init__``, which stores each one unchanged under its own name, so
:func:`sklearn.base.clone` and grid searches work on :class:`~geogpvae.GPVAEImputer`."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["Parameters", "parameter_names", "store_arguments"]


def parameter_names(cls: type) -> list[str]:
    """The names of the keyword arguments of ``cls.__init__``, in the order of its signature."""
    signature = inspect.signature(cls.__init__)
    return [p.name for p in signature.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


def store_arguments(obj: Any, arguments: dict[str, Any]) -> None:
    """Store each constructor argument of ``obj`` unchanged under its own name.

    Parameters
    ----------
    obj : object
        The object being constructed.
    arguments : dict
        ``locals()`` of its ``__init__``.
    """
    for name in parameter_names(type(obj)):
        setattr(obj, name, arguments[name])


class Parameters:
    """``get_params`` and ``set_params`` over the arguments of ``__init__``."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments by name, as stored (``deep`` is accepted for scikit-learn; no
        parameter is itself an estimator)."""
        return {name: getattr(self, name) for name in parameter_names(type(self))}

    def set_params(self, **params: Any) -> Any:
        """Change constructor arguments (checked when the estimator is fitted); returns ``self``.

        Raises
        ------
        ValueError
            A name that is not a constructor argument.
        """
        known = parameter_names(type(self))
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters are: {', '.join(known)}")
            setattr(self, name, value)
        return self
