"""Results of costly, deterministic computations kept on disk and reused by later runs (opt in: ``POLICYOPT_CACHE_DIR``).

A design on data runs the held-out model check first (a G² Markov test and a Δ(t) check against 39 simulated data
sets, 5–30 s on the bundled homes), and every model-free guarantee composes its releases with ``dp_accounting``'s PLD
accountant.  Both are deterministic functions of their inputs: the same readings, options and seed give the same
result.  A study that runs ``schedule`` on the same readings at many bounds f̄ repeats them unchanged.

With the environment variable ``POLICYOPT_CACHE_DIR=FOLDER`` set, the functions decorated with :func:`cached` store
each result in ``FOLDER/<namespace>/<key>.pickle`` and return the stored result when the same inputs come again.  The
key is the SHA-256 of the pickled arguments, of the bytes of every source file of the installed ``policyopt``,
``problems`` and ``solvers`` packages and of the versions of Python and of the libraries the computations use: any
change of input, of code or of library gives a new key.  An argument that cannot be pickled is computed, not stored.
A stored file that cannot be read is computed again and replaced; files are written whole
(:func:`policyopt.io.files.atomic_write`), so runs in parallel share the folder safely.  A cached run prints the same
numbers as an uncached one; only its wall time differs (a stored step keeps the ``wall_time_s`` it took when computed,
and shows no progress bar).  The files are Python pickles: point the variable only at a folder you own.  Unset (or
empty), nothing is read or written.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from pathlib import Path

from policyopt.errors import InvalidInputError
from policyopt.io.files import atomic_write

__all__ = ["CACHE_ENV", "cached", "cache_folder"]

#: The environment variable naming the folder (unset or empty: no cache).
CACHE_ENV = "POLICYOPT_CACHE_DIR"

#: Packages whose source files enter every key (the installed layout maps problems/ and solvers/ into it).
_PACKAGES = ("policyopt", "problems", "solvers")

#: Libraries whose versions enter every key.
_LIBRARIES = ("numpy", "scipy", "numba", "pandas", "hmmlearn", "dp-accounting", "arch")


def cache_folder() -> Path | None:
    """The folder named by ``POLICYOPT_CACHE_DIR`` (created if missing), or ``None`` when it is unset or empty.

    A folder this process may read but not write (a cache filled by someone else, shared read-only) is read: results
    found are used, new ones are computed and not stored.

    Raises
    ------
    InvalidInputError
        The variable names something that is not a folder, or a folder that cannot be created.
    """
    value = os.environ.get(CACHE_ENV, "")
    if not value:
        return None
    folder = Path(value)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInputError(f"`{CACHE_ENV}` must name a folder policyopt can create, got {value!r} "
                                f"({exc.strerror or exc})") from None
    return folder


@functools.cache
def _code_version() -> bytes:
    """SHA-256 of the Python and library versions and of every source file of the packages (once per process)."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(sys.version.encode())
    for lib in _LIBRARIES:
        try:
            h.update(f"{lib}={version(lib)};".encode())
        except PackageNotFoundError:
            h.update(f"{lib}=none;".encode())
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        roots = list(spec.submodule_search_locations or ()) if spec is not None else []
        for root in roots:
            for path in sorted(Path(root).rglob("*.py")):
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    return h.digest()


def _key(namespace: str, args: tuple, kwargs: dict) -> str | None:
    """The file name of a call's result, or ``None`` when its arguments cannot be pickled."""
    try:
        blob = pickle.dumps((namespace, args, sorted(kwargs.items())), protocol=5)
    except Exception:  # noqa: BLE001 - an argument pickle refuses (a lambda, a lock): compute, do not store
        return None
    return hashlib.sha256(_code_version() + blob).hexdigest()


def _load(path: Path):
    """``(True, result)`` from a readable stored file, else ``(False, None)``."""
    try:
        with open(path, "rb") as fh:
            return True, pickle.load(fh)
    except Exception:  # noqa: BLE001 - missing, partly written by a killed run, or from another layout: recompute
        return False, None


def _store(path: Path, result) -> None:
    """Write `result` to `path` whole (its namespace folder made first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, pickle.dumps(result, protocol=5))


def cached(namespace: str):
    """Decorate a deterministic function: with ``POLICYOPT_CACHE_DIR`` set, its results are stored and reused.

    Parameters
    ----------
    namespace : str
        The sub-folder of the function's results (one per function).

    Returns
    -------
    callable
        The decorator; the decorated function has the original as ``__wrapped__``.

    Notes
    -----
    Only for functions whose result depends on nothing but their arguments (and the code): seeds are arguments, and no
    clock, environment variable or file enters the result (a wall time in it is the computing run's).  Each call gets
    its own object (a fresh unpickling, or the computed one after it was written), so a caller may change it.
    """

    def decorate(func):
        """`func` wrapped: its results looked up in and added to the folder of :func:`cache_folder`."""

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            """`func`'s result for these arguments: stored, else computed (and stored when the folder is writable)."""
            folder = cache_folder()
            key = None if folder is None else _key(namespace, args, kwargs)
            if key is None:
                return func(*args, **kwargs)
            path = folder / namespace / f"{key}.pickle"
            found, result = _load(path)
            if found:
                return result
            result = func(*args, **kwargs)
            try:
                _store(path, result)
            except (OSError, pickle.PicklingError, TypeError, AttributeError):
                pass  # a full disk or a result pickle refuses: the run goes on with its computed result
            return result

        return wrapper

    return decorate
