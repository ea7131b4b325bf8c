"""``policyopt fran``: FRAN design by problem P1 of Luo et al. (2025) (correlated-sequence DP).

Registered in :func:`policyopt.cli.main.build_parser` through :func:`add_command`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

from policyopt.app.fran import DEFAULT_STATES, MAX_HOMES_SNAPSHOTS, cmc_model
from policyopt.cli.options import int_at_least, positive_float

__all__ = ["add_command"]

DEFAULT_MAX_AGE = 10


def _two_binary(text: str) -> dict:
    """Parse ``p=..,q=..,lambda=..`` into floats in [0, 1] (argparse type)."""
    out = {}
    for part in text.split(","):
        key, sep, val = part.partition("=")
        key = key.strip()
        if not sep or key not in ("p", "q", "lambda"):
            raise argparse.ArgumentTypeError(f"--two-binary expects p=P,q=Q,lambda=L, got {text!r}")
        if key in out:
            raise argparse.ArgumentTypeError(f"--two-binary gives {key} twice in {text!r}")
        try:
            v = float(val)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--two-binary: {key} must be a number, got {val!r}") from None
        if not (math.isfinite(v) and 0 <= v <= 1):
            raise argparse.ArgumentTypeError(f"--two-binary: {key} must lie in [0, 1], got {val!r}")
        out[key] = v
    missing = [k for k in ("p", "q", "lambda") if k not in out]
    if missing:
        raise argparse.ArgumentTypeError(f"--two-binary is missing {', '.join(missing)} in {text!r}")
    return out


def add_command(sub) -> None:
    """Add the ``fran`` sub-command to the argparse subparsers object `sub`.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        From ``parser.add_subparsers``.
    """
    cmd = sub.add_parser(
        "fran",
        help="FRAN design for correlated sequences: AoI vector and epsilon_c minimising the leakage (Luo et al. 2025, P1)",
        description=(
            "Solve problem P1 of Luo et al. (2025, eqs. 23-24): choose the AoI vector (slots) and the Laplace level "
            "epsilon_c (nats) of FRAN minimising the CSDP leakage epsilon_s subject to an MSE bound, on a coupling "
            "Markov chain; print the baselines of the paper's Fig. 5 (DP, DDP, ADP, CSDP) under the same bound. "
            "The leakage is the sound bound ln(1 + Δ_k (e^{d(k) ε_C} − 1)) unless --bound says otherwise. "
            "Above 4096 joint snapshots (m^s) Δ_k is replaced by a matrix-free spectral upper bound (up to 65536 "
            "snapshots; --bound sound and queries mean/sum only; status 'feasible')."
        ),
    )
    src = cmd.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="FILE",
                     help='JSON CMC: {"transitions": (s,s,m,m) or (m,m) row-stochastic, "coupling": (s,s), '
                     '"state_values": (m,) optional, "n_sequences": s (with one (m,m) matrix)}')
    src.add_argument("--two-binary", type=_two_binary, metavar="p=P,q=Q,lambda=L",
                     help="the paper's two binary sequences: P^(jk) = [[1-p,p],[q,1-q]], λ_11 = λ_22 = L")
    src.add_argument("--homes", metavar="U1,U2[,...]",
                     help="fit a CMC to these bundled CityLearn homes (e.g. Building_1,Building_2)")
    cmd.add_argument("--states", type=int_at_least("--states", 2), metavar="M",
                     help=f"quantile states per home with --homes (default {DEFAULT_STATES}; states^homes at most "
                     f"{MAX_HOMES_SNAPSHOTS})")
    cmd.add_argument("--max-mse", type=positive_float("--max-mse"), required=True, metavar="L",
                     help="bound l̄ on l_MSE (22), squared query units")
    cmd.add_argument("--max-age", type=int_at_least("--max-age", 0), default=DEFAULT_MAX_AGE, metavar="A",
                     help=f"largest age per sequence, slots (default {DEFAULT_MAX_AGE}; (A + 1)^s at most 2^20 AoI "
                     "vectors for s sequences)")
    cmd.add_argument("--bound", choices=("sound", "paper", "exact"), default="sound",
                     help="leakage minimised: sound (default), paper (eq. 15, NOT an upper bound; warns), exact "
                     "(exact leakage of small systems, scalar query)")
    cmd.add_argument("--query", choices=("mean", "sum", "max", "min"), default="mean",
                     help="released query f of the aged snapshot (default mean)")
    cmd.add_argument("--method", choices=("enumeration", "cvxpy", "scip", "groups"), default="enumeration",
                     help="P1 back end (default enumeration; cvxpy/scip support sound and paper; groups: exact search "
                     "over independent groups of coupled sequences, any number of sequences, queries mean/sum, no "
                     "baselines)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cmd.set_defaults(handler=_cmd_fran)


def _cmd_fran(args) -> int:
    """Handler of ``policyopt fran``: the report of :func:`policyopt.studies.fran_report.design_fran`, as text
    (``str(report)``) or JSON (``report.to_dict()``)."""
    from policyopt.privacy.fran import PaperBoundWarning
    from policyopt.studies.fran_report import design_fran

    cmc, label = cmc_model(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaperBoundWarning)  # the CLI prints its own one-line warning below
        report = design_fran(cmc, args.max_mse, query=args.query, max_age=args.max_age, bound=args.bound,
                             method=args.method, model_label=label)
    if args.bound == "paper":  # after the design succeeded: an error stays the only stderr line
        print("policyopt: warning: --bound paper uses Luo et al.'s (2025) eq. (15), which is NOT an upper bound of the leakage "
              "(its proof uses ln(1 + x(e^y − 1)) ≤ xy, false for 0 < x < 1); the sound bound is the default",
              file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(report)
    return 0
