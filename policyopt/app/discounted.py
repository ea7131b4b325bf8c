"""``policyopt discounted`` below the command line: the options checked, the readings read and the schedule designed
(:func:`discounted_from_options`; from Python :func:`policyopt.design_discounted` on a data frame).
"""

from __future__ import annotations

from policyopt.errors import InvalidInputError

__all__ = ["discounted_from_options", "MAX_HORIZON", "MIN_EPSILON", "MAX_EPSILON", "MAX_CLIP", "MAX_BETA",
           "MAX_CERTIFIED_HYPERBOLIC_T", "MAX_OPTIMAL_T", "MAX_CVXPY_HYPERBOLIC_T", "AUTO_DUAL_FROM_T"]

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


def discounted_from_options(args):
    """``policyopt discounted`` of parsed options (`args`: ``notion``, ``epsilon``, ``alpha``, ``beta``, ``horizon``,
    ``schedule``, ``solver``, ``clip``, ``data``): the options checked against each other and the limits above, the
    readings of ``data`` read (else the bundled homes), and :func:`policyopt.studies.discounted_report.design_discounted`
    run; its :class:`~policyopt.studies.discounted_report.DiscountedReport` (``to_dict()`` the command's ``--json``
    object, ``str()`` its text, ``warnings`` what it prints on stderr).

    Raises
    ------
    InvalidInputError
        Inconsistent options (naming the command-line options) or unreadable data.
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
    return design_discounted(args.notion, args.epsilon, T, schedule=args.schedule, solver=args.solver, data=df,
                             clip=args.clip, source=source, **par)
