"""Compile the numba kernels into their on-disk caches once, before the test processes start (``make test``).

Every compiled loop of policyopt (``cache=True``) and of the tests' exact-risk reference is compiled at its first call
in a process, unless numba's cache (``__pycache__`` beside the source) already holds it.  On a clean clone no cache
exists, so the two pytest-xdist workers, their warm servers and the commands the tests start all compiled the same
kernels at once (a few seconds each, on both cores).  This script calls each kernel once, serially, with the argument
types of the real calls, through the same public functions; the processes that follow load them.  Nothing it computes
is checked here: the tests check the kernels.  Run by the Makefile; ``python tests/_compile_kernels.py`` prints the
time taken.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tests' helpers (_warm_cli, _exact_risk, _processes)


def _tpl_kernels() -> None:
    """The TPL envelope's loops (tpl_kernels) with both argument layouts the real calls give: the pruned grid
    (n ≥ 160 states) in this thread (n = 160) and on two threads (strided row parts, n = 170), and the compiled pair
    passes (n ≥ 32) on a writable and a read-only matrix."""
    from policyopt.privacy.temporal import LossFunction, supremum
    from policyopt.privacy.tpl_envelope import PairBounds

    rng = np.random.default_rng(0)
    alphas = np.array([0.0, 0.1, 1.0, 40.0])
    for n in (160, 170):
        P = rng.random((n, n)) ** 3
        P[rng.random(P.shape) < 0.3] = 0.0
        P[:, 0] += 1e-6
        P /= P.sum(1, keepdims=True)
        loss = LossFunction(P)
        loss.piecewise(alphas)
        loss.per_pair(alphas)
        supremum(loss, 1.0)
    for writeable in (True, False):
        Q = P[:40, :40] / P[:40, :40].sum(1, keepdims=True)
        Q.setflags(write=writeable)
        for alpha in (0.5, 40.0):  # the pair loop and Dinkelbach's test
            PairBounds(Q).loss(alpha)


def _tv_pairs_kernel() -> None:
    """The compiled largest-pair search of Δ(t) (tv_pairs, chains of ≥ 32 states): an order-2 model of 6 states."""
    from policyopt.models.markov_model import fit_markov_model

    x = np.random.default_rng(0).integers(0, 6, size=(3, 200))
    fit_markov_model("order:2", x, 6, users=("a", "b", "c"), smoothing=0.5).log_max_tv(np.array([0, 1, 2, 5]))


def _exact_risk_kernels() -> None:
    """The tests' exact-risk forward passes (tests/_exact_risk.py)."""
    from _exact_risk import tail_risk
    from _processes import first_order_chain

    tail_risk(first_order_chain(0.1, 0.2), 0, 1, 1.0, horizon=8)


def main() -> None:
    from _warm_cli import _load_compiled_kernels

    start = time.perf_counter()
    _load_compiled_kernels()  # the held-out model check's G² kernel and the chain simulation's time loop
    _tpl_kernels()
    _tv_pairs_kernel()
    _exact_risk_kernels()
    print(f"numba kernels compiled or loaded from their caches in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
