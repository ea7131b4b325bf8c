"""``policyopt discounted``: Laplace schedules under ε-DP and discounted DP (Farokhi 2020).

Registered in :func:`policyopt.cli.main.build_parser` through :func:`add_command`.
"""

from __future__ import annotations

import json
import sys

from policyopt.cli.options import int_at_least, positive_float
from policyopt.errors import InvalidInputError

__all__ = ["add_command", "run", "MAX_OPTIMAL_T", "MAX_CVXPY_HYPERBOLIC_T", "AUTO_DUAL_FROM_T"]

#: Largest horizon T of any schedule (a few float arrays of length T).
MAX_HORIZON = 1_000_000
#: Range of --epsilon, nats (outside it b_t = Δf/ε-type scales under- or overflow: all-zero or infinite noise).
MIN_EPSILON, MAX_EPSILON = 1e-6, 1000.0
#: Largest --clip (kWh per home and day) and --beta.
MAX_CLIP = 1e100
MAX_BETA = 1e100
#: Largest hyperbolic horizon: the printed loss uses the direct O(T²) sum, whose error bound is proved (~7 s here).
MAX_CERTIFIED_HYPERBOLIC_T = 50_000
#: Largest horizon for ``--schedule optimal`` (solve time of either back end).
MAX_OPTIMAL_T = 50_000
#: Largest hyperbolic horizon for ``--solver cvxpy`` (dense T×T constraint: ~60 s at T = 2000).
MAX_CVXPY_HYPERBOLIC_T = 2000
#: ``--solver auto`` uses the dual back end for hyperbolic horizons above this.
AUTO_DUAL_FROM_T = 1000


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


def _parameter(args) -> dict:
    """The notion's keyword (alpha/beta) after checking that the right one was given."""
    if args.notion == "dp":
        if args.alpha is not None or args.beta is not None:
            raise InvalidInputError("--notion dp takes neither --alpha nor --beta")
        return {}
    if args.notion == "exponential":
        if args.beta is not None:
            raise InvalidInputError(f"--notion exponential takes --alpha, not --beta (got --beta {args.beta:g})")
        if args.alpha is None:
            raise InvalidInputError("--notion exponential needs --alpha A (discount factor in (0, 1))")
        if args.alpha >= 1 and args.schedule != "optimal":
            raise InvalidInputError(
                f"--alpha must be < 1 for the corollary schedule (got {args.alpha:g}; α = 1 is ε-DP: use --notion dp)"
            )
        if args.alpha > 1:
            raise InvalidInputError(f"--alpha must be in (0, 1], got {args.alpha:g}")
        return {"alpha": args.alpha}
    if args.alpha is not None:
        raise InvalidInputError(f"--notion hyperbolic takes --beta, not --alpha (got --alpha {args.alpha:g})")
    if args.beta is None:
        raise InvalidInputError("--notion hyperbolic needs --beta B (discounting coefficient > 0)")
    return {"beta": args.beta}


def run(args) -> int:
    """Handler of ``policyopt discounted``; prints text or JSON and returns the exit code.

    Raises
    ------
    InvalidInputError
        On inconsistent options (turned into one line on stderr by :func:`policyopt.cli.main`).
    """
    from policyopt.studies.discounted_report import design_discounted

    par = _parameter(args)
    T = args.horizon
    solver = args.solver
    if args.schedule != "optimal" and solver != "auto":
        raise InvalidInputError(f"--solver {solver} applies to --schedule optimal only")
    if args.schedule == "optimal":
        if solver == "auto":
            solver = "dual" if args.notion == "hyperbolic" and T > AUTO_DUAL_FROM_T else "cvxpy"
        if T > MAX_OPTIMAL_T:
            raise InvalidInputError(
                f"--horizon {T} is too large for --schedule optimal (at most {MAX_OPTIMAL_T}); use --schedule corollary"
            )
        if solver == "cvxpy" and args.notion == "hyperbolic" and T > MAX_CVXPY_HYPERBOLIC_T:
            raise InvalidInputError(
                f"--horizon {T} is too large for --solver cvxpy with --notion hyperbolic (at most "
                f"{MAX_CVXPY_HYPERBOLIC_T}: the constraint matrix is dense); use --solver dual"
            )
    if args.notion == "hyperbolic" and T > MAX_CERTIFIED_HYPERBOLIC_T:
        raise InvalidInputError(
            f"--horizon {T} is too large for --notion hyperbolic (at most {MAX_CERTIFIED_HYPERBOLIC_T}): the printed "
            "loss must be certified, and only the direct O(T²) sum is (the FFT sum's error bound is an estimate)"
        )
    df, source = None, None
    if args.data is not None:
        from policyopt.io import read_readings_csv

        df, source = read_readings_csv(args.data), f"data {args.data}"
    report = design_discounted(args.notion, args.epsilon, T, schedule=args.schedule, solver=args.solver, data=df,
                               clip=args.clip, source=source, **par)
    for w in report.warnings:
        print(f"policyopt: warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(report)
    return 0
