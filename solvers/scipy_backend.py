"""Availability check and version string shared by the numpy/scipy back ends.

Used by the TPL allocators of :mod:`policyopt.solvers.tpl_alloc` (Algorithms 7–8) and the dual
and reduced discounted-DP back ends of :mod:`policyopt.solvers.discounted_opt`, which need only
numpy and scipy.
"""

from __future__ import annotations

__all__ = ["scipy_available", "scipy_versions"]


def scipy_available() -> tuple[bool, str]:
    """Whether ``scipy.optimize`` imports.

    Returns
    -------
    (bool, str)
        ``(True, "")``, or ``(False, reason)`` naming what to install; never raises.
    """
    import importlib

    try:
        importlib.import_module("scipy.optimize")
    except Exception as exc:  # noqa: BLE001
        return False, f"scipy is not importable ({exc}); `pip install scipy`"
    return True, ""


def scipy_versions() -> str:
    """Versions of the numerical back ends as one string for a Solution's ``backend_version``.

    Returns
    -------
    str
        ``"numpy <version>; scipy <version>"``.

    Raises
    ------
    ImportError
        If scipy is not installed.
    """
    import numpy as np
    import scipy

    return f"numpy {np.__version__}; scipy {scipy.__version__}"
