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
    "add_distributed_options",
    "wants_distributed",
    "load_distributed_model",
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
    src.add_argument("--data", metavar="CSV_OR_PARQUET", help="long CSV with header user,time,value (time in integer "
                     "slots), or Parquet with those columns: a .parquet file, a directory or a glob of files")
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
        from policyopt.io import read_readings

        df = read_readings(args.data)
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


def add_distributed_options(cmd) -> None:
    """``--workers`` / ``--scheduler``: fit a Parquet ``--data`` set as a map-reduce over its files on Dask."""
    group = cmd.add_argument_group("distributed estimation (Parquet --data, one file per group of whole users)")
    group.add_argument("--workers", type=int_at_least("--workers", 1), default=None, metavar="N",
                       help="estimate the chains, Δ(t), the envelope and the MSE terms on a local Dask cluster of N "
                       "worker processes, one Parquet file at a time per worker (memory bounded by the file size)")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="the same on an existing Dask cluster (e.g. tcp://host:8786; its workers need policyopt "
                       "and the --data files at the same paths)")


def wants_distributed(args) -> bool:
    """True when ``--workers`` or ``--scheduler`` was given."""
    return getattr(args, "workers", None) is not None or getattr(args, "scheduler", None) is not None


def load_distributed_model(args):
    """(population, info, unit, penalty) of a Parquet ``--data`` set reduced on Dask (see :mod:`policyopt.studies.distributed`).

    The population is a :class:`~policyopt.studies.distributed.TabulatedMaxTV` and the penalty a
    :class:`~policyopt.studies.distributed.TabulatedMSEPenalty`, tabulated over the ages the
    schedule search needs; the numbers equal those of the serial path (tested).

    Raises
    ------
    InvalidInputError
        Both ``--workers`` and ``--scheduler``; no Parquet ``--data``; ``--chain``/``--matrix``; ``--plot``;
        ``--users`` that disagrees with the data; any error of
        :func:`~policyopt.studies.distributed.fit_partitions`.
    """
    from policyopt.io import is_parquet_source
    from policyopt.studies.distributed import dask_client, fit_partitions

    if args.workers is not None and args.scheduler is not None:
        raise InvalidInputError(f"give either --workers {args.workers} (a local cluster) or --scheduler {args.scheduler}, not both")
    if args.data is None or not is_parquet_source(args.data):
        raise InvalidInputError(
            f"--workers/--scheduler need a Parquet --data (a directory, a glob or a .parquet file), got --data {args.data!r}"
        )
    if getattr(args, "plot", None) is not None:
        raise InvalidInputError("--plot is not available with --workers/--scheduler (the Δ(t) table covers the search box only); "
                                "draw it from a serial run")
    states = DEFAULT_STATES if args.states is None else args.states
    smoothing = DEFAULT_SMOOTHING if args.smoothing is None else args.smoothing
    with dask_client(workers=args.workers, scheduler=args.scheduler) as client:
        fit = fit_partitions(
            args.data, states, smoothing=smoothing, client=client,
            horizon=max(args.max_age, args.max_interval) + 1, n_staleness=args.max_age + args.max_interval + 2,
        )
    if args.users is not None and args.users != fit.population.n_users:
        raise InvalidInputError(
            f"--users {args.users} disagrees with the data, which has {fit.population.n_users} usable users; "
            "omit --users when giving data"
        )
    info = {
        "source": f"data {args.data}",
        "smoothing": smoothing,
        "state_values": fit.state_values.tolist(),
        "excluded_users": dict(fit.excluded),
        "states": states,
        "distributed": {
            "workers": args.workers,
            "scheduler": args.scheduler,
            "partitions": fit.partitions,
            "readings": fit.readings,
            "users_read": fit.users,
        },
    }
    return fit.population, info, "", fit.penalty
