"""Options shared by the sub-commands: one-line argparse errors, validated numbers, the model source.

Imports the studies and lower layers only (lazily, inside functions, so ``policyopt --help`` starts fast).
"""

from __future__ import annotations

import argparse
import math

from policyopt.errors import InvalidInputError

__all__ = [
    "OneLineParser",
    "positive_float",
    "int_at_least",
    "non_negative_float",
    "add_model_options",
    "load_model",
]

DEFAULT_MAX_PENALTY = 0.15
DEFAULT_STATES = 12
DEFAULT_USERS = 20
DEFAULT_MAX_AGE = 168
DEFAULT_MAX_INTERVAL = 168
DEFAULT_RELEASES = 24
DEFAULT_SMOOTHING = 0.01
DEFAULT_PLOT_EPOCHS = 4


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors on one line with exit code 2."""

    def error(self, message):  # noqa: D401 - argparse API
        """Print the usage error on one line and exit with code 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive_float(name):
    """An argparse ``type`` accepting a positive finite float; errors name the option `name`."""
    def parse(text):
        """Parse a positive finite float or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{name} must be a positive finite number, got {text!r}")
        return value

    return parse


def int_at_least(name, lower):
    """An argparse ``type`` accepting an integer ≥ `lower`; errors name the option `name`."""
    def parse(text):
        """Parse an integer ≥ `lower` or raise ArgumentTypeError naming the option."""
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < lower:
            raise argparse.ArgumentTypeError(f"{name} must be ≥ {lower}, got {text!r}")
        return value

    return parse


def non_negative_float(name):
    """An argparse ``type`` accepting a finite float ≥ 0; errors name the option `name`."""
    def parse(text):
        """Parse a finite float ≥ 0 or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number ≥ 0, got {text!r}")
        return value

    return parse


def add_model_options(cmd) -> None:
    """Model and search options shared by ``schedule`` and ``sweep`` (one definition for both).

    Adds the model source (``--data`` | ``--chain`` | ``--matrix``), ``--states``, ``--users``,
    ``--max-age``, ``--max-interval``, ``--releases``, ``--smoothing``, ``--method`` and
    ``--relax``; each command adds its own ``--max-penalty`` (a value or a grid).
    """
    src = cmd.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="CSV", help="long CSV with header user,time,value (time in integer slots)")
    src.add_argument("--chain", metavar="SPEC", help="two-state:p=P,q=Q (states valued -1/+1), eq. (43)")
    src.add_argument("--matrix", metavar="FILE", help="CSV/NPY transition matrix, K×K or (K+1)×K with state values first")
    cmd.add_argument("--states", type=int_at_least("--states", 2), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES})")
    cmd.add_argument("--users", type=int_at_least("--users", 1), metavar="I",
                     help=f"number of users for --chain/--matrix (default {DEFAULT_USERS}; taken from data otherwise)")
    cmd.add_argument("--max-age", type=int_at_least("--max-age", 0), default=DEFAULT_MAX_AGE, metavar="A_MAX",
                     help=f"largest aging A considered, slots (default {DEFAULT_MAX_AGE})")
    cmd.add_argument("--max-interval", type=int_at_least("--max-interval", 1), default=DEFAULT_MAX_INTERVAL,
                     metavar="S_MAX", help=f"largest inter-publish time S_bar considered, slots (default {DEFAULT_MAX_INTERVAL})")
    cmd.add_argument("--releases", type=int_at_least("--releases", 1), default=DEFAULT_RELEASES, metavar="N",
                     help=f"releases after which the noise-only benchmark's risk is reported (default {DEFAULT_RELEASES})")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=None, metavar="S",
                     help=f"additive smoothing pseudo-count for estimated chains (default {DEFAULT_SMOOTHING})")
    cmd.add_argument("--method", choices=("exact", "heuristic", "cvxpy", "pyomo", "all"), default="exact",
                     help="exact: problem (28) with the exact Δ(t), integer (default); heuristic/cvxpy/pyomo: problem (39) "
                     "with the envelope Δ(t) ≤ c·ρ^t; all: every back end side by side")
    cmd.add_argument("--relax", action="store_true",
                     help="continuous relaxation of A and S_bar for the (39) back ends (cvxpy needs it)")


def load_model(args):
    """Population plus model facts from the command-line options."""
    from policyopt.models.markov import Population

    uses_data = args.chain is None and args.matrix is None
    if not uses_data:
        if args.states is not None:
            raise InvalidInputError("--states applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if args.smoothing is not None:
            raise InvalidInputError("--smoothing applies to --data (or the bundled data) only; omit it with --chain/--matrix")
        if args.chain is not None:
            from policyopt.io import parse_chain_spec

            chain = parse_chain_spec(args.chain)
            source = f"two-state chain {args.chain}"
        else:
            from policyopt.io import read_matrix

            chain = read_matrix(args.matrix)
            source = f"matrix {args.matrix}"
        users = DEFAULT_USERS if args.users is None else args.users
        return Population([chain], [users]), {"source": source, "excluded_users": {}}, ""

    from policyopt.models.estimation import fit_population

    if args.data is None:
        from policyopt.data import load_citylearn

        df = load_citylearn()
        source, unit = "bundled CityLearn 2022, 17 homes, hourly kWh", "kWh^2"
    else:
        from policyopt.io import read_readings_csv

        df = read_readings_csv(args.data)
        source, unit = f"data {args.data}", ""
    states = DEFAULT_STATES if args.states is None else args.states
    smoothing = DEFAULT_SMOOTHING if args.smoothing is None else args.smoothing
    fitted = fit_population(df, states, smoothing=smoothing, source=f"--data {args.data!r}" if args.data else "bundled data")
    if args.users is not None and args.users != fitted.population.n_users:
        raise InvalidInputError(
            f"--users {args.users} disagrees with the data, which has {fitted.population.n_users} usable users; "
            "omit --users when giving data"
        )
    info = {
        "source": source,
        "smoothing": smoothing,
        "state_values": fitted.quantizer.state_values.tolist(),
        "excluded_users": dict(fitted.excluded),
    }
    return fitted.population, info, unit


