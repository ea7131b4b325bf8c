"""Progress bars (tqdm, on stderr) for the long steps, shown only where someone watches.

The command line shows them when stderr is a terminal and ``--json`` is not given (:func:`shown` around the
command); Python code asks for them with ``with policyopt.progress.shown(): ...``.  A bar appears only once its step
has run for :data:`DELAY_S` seconds (tqdm's ``delay``), so quick steps print nothing, and it is removed when the step
ends (``leave=False``): the command's output is the same with and without bars.  Off by default, so library calls,
pipes, log files and Dask workers (other processes) never see one.

For tests, the environment variable ``POLICYOPT_PROGRESS_DELAY_S=SECONDS`` (a finite number ≥ 0) replaces
:data:`DELAY_S` for the bars made while it is set, so a test can see a bar without a step that lasts seconds
(anything else leaves :data:`DELAY_S`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import sys

__all__ = ["DELAY_S", "bar", "shown", "showing"]

#: Seconds a step runs before its bar appears.
DELAY_S = 2.0

#: Environment variable replacing :data:`DELAY_S` (for tests; see the module docstring).
DELAY_ENV = "POLICYOPT_PROGRESS_DELAY_S"

_SHOW = contextvars.ContextVar("policyopt_progress", default=False)


@contextlib.contextmanager
def shown(enabled: bool = True):
    """Show the bars of the steps run inside the block (``enabled=False``: hide them).

    Parameters
    ----------
    enabled : bool
        Whether bars are shown in the block.
    """
    token = _SHOW.set(bool(enabled))
    try:
        yield
    finally:
        _SHOW.reset(token)


def showing() -> bool:
    """Whether bars are shown here (inside ``shown(True)``)."""
    return _SHOW.get()


class _Silent:
    """The bar when none is shown: the same methods, doing nothing."""

    def update(self, n: int = 1) -> None:
        """Nothing."""

    def close(self) -> None:
        """Nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def _delay() -> float:
    """Seconds before a bar appears: ``POLICYOPT_PROGRESS_DELAY_S`` when it is a finite number ≥ 0, else
    :data:`DELAY_S`."""
    try:
        value = float(os.environ.get(DELAY_ENV, ""))
    except ValueError:
        return DELAY_S
    return value if math.isfinite(value) and value >= 0 else DELAY_S


def bar(total: int | None, desc: str, unit: str = "step"):
    """A progress bar for a step of `total` units (``update(n)``, ``close()``, or a ``with`` block).

    Parameters
    ----------
    total : int or None
        Units in the step (None: unknown, a counter).
    desc : str
        What the step does (a few words).
    unit : str
        The unit counted.

    Returns
    -------
    tqdm.tqdm or a silent stand-in
        A tqdm bar on stderr, shown after :data:`DELAY_S` s (or ``POLICYOPT_PROGRESS_DELAY_S``) and removed at the
        end, inside :func:`shown`; otherwise an object with the same ``update``/``close`` that prints nothing.
    """
    if not _SHOW.get():
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=False, delay=_delay())
