"""``policyopt discounted``: Laplace schedules under ε-DP and discounted DP (Farokhi 2020).

Registered in :func:`policyopt.cli.main.build_parser` through :func:`add_command`; the work is
:func:`policyopt.app.discounted.discounted_from_options`, this module parses options and prints.
"""

from __future__ import annotations

import json
import sys

from policyopt.app.discounted import (
    AUTO_DUAL_FROM_T,
    MAX_BETA,
    MAX_CERTIFIED_HYPERBOLIC_T,
    MAX_CLIP,
    MAX_EPSILON,
    MAX_HORIZON,
    MAX_OPTIMAL_T,
    MIN_EPSILON,
)
from policyopt.cli.options import int_at_least, positive_float

__all__ = ["add_command", "run"]

def add_command(sub) -> None:
    """Add the ``discounted`` sub-command to the argparse subparsers `sub`.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subparsers object of :func:`policyopt.cli.main.build_parser`.
    """
    from policyopt.studies.citylearn import DEFAULT_DAILY_CLIP

    cmd = sub.add_parser(
        "discounted",
        help="Laplace noise schedules under ε-DP or exponentially / hyperbolically discounted DP",
        description=(
            "Laplace scales b_1..b_T for the daily mean of the homes' consumption under ε-DP (Corollary 8), "
            "(ε, α)-exponentially (Corollary 12) or (ε, β)-hyperbolically discounted DP (corrected Corollary 16) "
            "(Farokhi, ICCPS 2020), or the schedule of least total variance ('optimal'), with the worst discounted "
            "privacy loss (nats, an upper bound) and the expected relative error on the data (one slot = one day)."
        ),
    )
    cmd.add_argument("--notion", choices=("dp", "exponential", "hyperbolic"), required=True,
                     help="dp: Σ ρ(k) ≤ ε; exponential: Σ α^(t−k) ρ(k) ≤ ε; hyperbolic: Σ ρ(k)/(1+β(t−k)) ≤ ε")
    cmd.add_argument("--epsilon", type=positive_float("--epsilon", MAX_EPSILON, MIN_EPSILON), required=True, metavar="E",
                     help=f"budget ε, nats (from {MIN_EPSILON:g} to {MAX_EPSILON:g})")
    par = cmd.add_mutually_exclusive_group()
    par.add_argument("--alpha", type=positive_float("--alpha"), metavar="A", help="discount factor α ∈ (0, 1) (exponential)")
    par.add_argument("--beta", type=positive_float("--beta", MAX_BETA), metavar="B",
                     help=f"discounting coefficient β > 0 (hyperbolic; at most {MAX_BETA:g})")
    cmd.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), required=True, metavar="T",
                     help=f"number of releases (days; at most {MAX_HORIZON}, {MAX_OPTIMAL_T} with --schedule optimal, "
                     f"{MAX_CERTIFIED_HYPERBOLIC_T} with --notion hyperbolic)")
    cmd.add_argument("--schedule", choices=("corollary", "optimal", "paper"), default="corollary",
                     help="corollary: Corollaries 8 / 12 / corrected 16 (default); optimal: least total variance "
                     "(cvxpy); paper: the corollaries exactly as printed (warns where invalid)")
    cmd.add_argument("--solver", choices=("auto", "cvxpy", "dual"), default="auto",
                     help="back end of --schedule optimal: cvxpy (Clarabel) or dual (L-BFGS-B on the Lagrange dual, FFT "
                     f"products); auto: dual for hyperbolic T > {AUTO_DUAL_FROM_T}, else cvxpy")
    cmd.add_argument("--clip", type=positive_float("--clip", MAX_CLIP), default=DEFAULT_DAILY_CLIP, metavar="D",
                     help=f"clip bound per home and day, kWh; Δf = D / homes (default {DEFAULT_DAILY_CLIP:g}, at most "
                     f"{MAX_CLIP:g})")
    cmd.add_argument("--data", metavar="CSV", help="long CSV user,time,value (hourly kWh); bundled CityLearn data by default")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cmd.set_defaults(handler=run)


def run(args) -> int:
    """Handler of ``policyopt discounted``: the report of :func:`policyopt.app.discounted.discounted_from_options`,
    its warnings on stderr, then text or JSON; exit code.

    Raises
    ------
    InvalidInputError
        On inconsistent options (turned into one line on stderr by :func:`policyopt.cli.main`).
    """
    from policyopt.app.discounted import discounted_from_options

    report = discounted_from_options(args)
    for w in report.warnings:
        print(f"policyopt: warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(report)
    return 0
