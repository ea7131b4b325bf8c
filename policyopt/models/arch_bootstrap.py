"""``arch.bootstrap`` (Kevin Sheppard's ``arch`` package) imported without ``arch``'s package initialiser.

policyopt uses two things of ``arch``: ``arch.bootstrap.CircularBlockBootstrap`` and
``arch.bootstrap.optimal_block_length`` (the readings' MSE band, the Δ(t) band's block length, the error bars'
replay).  ``import arch.bootstrap`` first runs ``arch/__init__.py``, which imports ``arch.univariate`` and with it
statsmodels, formulaic and matplotlib: about 1.7 s of a command's start on the 2-core machine (``python -X importtime``,
``arch`` 8.0), none of it used by the bootstrap.

:func:`arch_bootstrap` puts a placeholder for the ``arch`` package into ``sys.modules`` (its real ``__path__``,
``__spec__`` and ``__file__``) before importing ``arch.bootstrap``, so the submodule loads alone.  The placeholder is
the package module itself, initialised late: the first look-up of a name it does not hold yet (``arch.arch_model``,
``arch.__version__``, ``from arch import arch_model``) runs ``arch/__init__.py`` in it, once, after which it is the
ordinary ``arch`` package.  Code that imports ``arch`` after policyopt therefore sees all of ``arch``.  If ``arch`` was
imported before, nothing is replaced.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

__all__ = ["arch_bootstrap", "mean_interval"]

_LOCK = threading.RLock()


class _LateInitPackage(types.ModuleType):
    """A package module whose ``__init__.py`` runs at the first look-up of a name it does not hold."""

    def __getattr__(self, name: str):
        with _LOCK:
            if not self.__dict__.get("_policyopt_initialised", False):
                self.__dict__["_policyopt_initialised"] = True
                self.__spec__.loader.exec_module(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def arch_bootstrap() -> types.ModuleType:
    """The ``arch.bootstrap`` module, imported without running ``arch/__init__.py`` first (see the module docstring).

    Returns
    -------
    module
        ``arch.bootstrap`` (``CircularBlockBootstrap``, ``optimal_block_length``, ...).

    Raises
    ------
    ImportError
        If ``arch`` is not installed.
    """
    with _LOCK:
        module = sys.modules.get("arch.bootstrap")
        if module is not None:
            return module
        if "arch" not in sys.modules:
            spec = importlib.util.find_spec("arch")
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError("policyopt needs the arch package (pip install arch)")
            package = _LateInitPackage("arch")
            package.__spec__ = spec
            package.__loader__ = spec.loader
            package.__file__ = spec.origin
            package.__path__ = list(spec.submodule_search_locations)
            package.__package__ = "arch"
            sys.modules["arch"] = package
        return importlib.import_module("arch.bootstrap")


def mean_interval(series, block: int, *, reps: int, level: float, seed: int) -> tuple[float, float]:
    """Two-sided percentile interval of the mean of `series` by ``arch``'s circular block bootstrap.

    Parameters
    ----------
    series : array_like, shape (n,)
        Per-slot (or per-release) values, in time order.
    block : int
        Block length (slots), ≥ 1.
    reps : int
        Bootstrap replicates.
    level : float
        Coverage of the interval, in (0, 1).
    seed : int
        Seed of the resampling (numpy's generator: simulation only, nothing released).

    Returns
    -------
    (float, float)
        Lower and upper end.  A series without spread is every one of its resamples, so both ends are its mean — what
        the resampling gives bit for bit (each replicate's ``np.mean`` is of the same values) — and ``arch`` is not
        imported for it (``make demo``'s fresh schedule has no staleness, so its error is the noise's alone).
    """
    import numpy as np

    x = np.asarray(series, dtype=float)
    if x.size and np.ptp(x) == 0:
        m = float(np.mean(x))
        return m, m
    bs = arch_bootstrap().CircularBlockBootstrap(int(block), x, seed=np.random.default_rng(seed))  # simulation only
    ci = bs.conf_int(np.mean, reps=int(reps), method="percentile", size=float(level))
    return float(ci[0, 0]), float(ci[1, 0])
