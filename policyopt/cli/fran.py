"""``policyopt fran``: FRAN design by problem P1 of Luo et al. (2025) (correlated-sequence DP).

Registered in :func:`policyopt.cli.main.build_parser` through :func:`add_command`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

from policyopt.cli.options import int_at_least, positive_float
from policyopt.formatting import fmt_upper
from policyopt.errors import InvalidInputError, fmt

__all__ = ["add_command"]

DEFAULT_MAX_AGE = 10
DEFAULT_STATES = 2


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


#: Largest joint state count states^homes fitted by --homes (the exact Δ_k works on dense matrices of that order).
MAX_HOMES_SNAPSHOTS = 1024
#: Largest magnitude of a state value in --model.
MAX_ABS_VALUE = 1e100
#: Largest n_sequences of a --model (the joint chain has m^s snapshots; beyond 65536 nothing is computed anyway).
MAX_SEQUENCES = 64
#: Deepest JSON nesting read from --model (checked on the text before parsing, so no RecursionError).
MAX_JSON_DEPTH = 32


def _max_nesting(text: str) -> int:
    """Deepest bracket nesting of a JSON text (brackets inside strings ignored)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def load_model(args):
    """The coupled chain (CMC) of ``policyopt fran`` from --model, --two-binary or --homes/--states (data)."""
    from policyopt.models.cmc import CouplingMarkovChain, fit_cmc_from_readings, two_binary_cmc

    if args.states is not None and args.homes is None:
        raise InvalidInputError("--states applies only to --homes")
    if args.two_binary is not None:
        tb = args.two_binary
        label = f"two binary sequences p={tb['p']:g} q={tb['q']:g} lambda={tb['lambda']:g} (Luo et al. 2025, eq. 25)"
        return two_binary_cmc(tb["p"], tb["q"], tb["lambda"]), label
    if args.homes is not None:
        from policyopt.data import load_citylearn

        users = [u.strip() for u in args.homes.split(",") if u.strip()]
        if len(users) < 1:
            raise InvalidInputError(f"--homes must name at least one home, got {args.homes!r}")
        states = DEFAULT_STATES if args.states is None else args.states
        if states ** len(users) > MAX_HOMES_SNAPSHOTS:
            raise InvalidInputError(
                f"--homes with {len(users)} homes and --states {states} gives {states}^{len(users)} joint snapshots; at "
                f"most {MAX_HOMES_SNAPSHOTS} are fitted (fewer states or homes)")
        cmc = fit_cmc_from_readings(load_citylearn(), users, states)
        return cmc, f"CityLearn homes {', '.join(users)} ({states} quantile states each, fitted CMC)"
    from policyopt.io import read_text

    text = read_text(args.model, "--model")
    depth = _max_nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise InvalidInputError(f"--model {fmt(args.model)}: JSON nested {depth} levels deep; at most {MAX_JSON_DEPTH} "
                                "(a CMC is at most 4-D)")

    def no_constant(name):
        """json.loads hook: NaN/Infinity in --model are refused with a one-line InvalidInputError."""
        raise InvalidInputError(f"--model {fmt(args.model)}: {name} is not a number JSON allows (use finite numbers)")

    try:
        spec = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"--model {fmt(args.model)}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(spec, dict):
        raise InvalidInputError(f"--model {args.model}: expected a JSON object, got {fmt(spec)}")
    unknown = sorted(set(spec) - {"transitions", "coupling", "state_values", "n_sequences"})
    if unknown:
        raise InvalidInputError(f"--model {args.model}: unknown keys {unknown} (allowed: transitions, coupling, "
                                "state_values, n_sequences)")
    for key in ("transitions", "coupling"):
        if key not in spec:
            raise InvalidInputError(f"--model {args.model}: missing key {key!r}")
    values = spec.get("state_values")
    if isinstance(values, list) and any(isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > MAX_ABS_VALUE
                                        for v in values):
        raise InvalidInputError(f"--model {fmt(args.model)}: state_values must lie within ±{MAX_ABS_VALUE:g} (the "
                                f"query's sensitivity and MSE must stay finite), got {fmt(values)}")
    n_seq = spec.get("n_sequences")
    if n_seq is not None and (isinstance(n_seq, bool) or not isinstance(n_seq, int) or not 1 <= n_seq <= MAX_SEQUENCES):
        raise InvalidInputError(f"--model {fmt(args.model)}: n_sequences must be an integer from 1 to {MAX_SEQUENCES}, "
                                f"got {fmt(n_seq)}")
    try:
        cmc = CouplingMarkovChain(spec["transitions"], spec["coupling"], spec.get("state_values"),
                                  n_sequences=spec.get("n_sequences"))
    except InvalidInputError as exc:
        raise InvalidInputError(f"--model {args.model}: {exc}") from None
    return cmc, f"model {args.model}"


def _probe_age_limit(args, cmc, prob, sol, status, message):
    """Like ``schedule``'s A = A_MAX + 1 probe: when the optimum uses the age limit, solve once with the limit one
    higher; if that lowers ε_S the answer is ``unbounded`` (best within the limit returned), else it stays optimal."""
    from policyopt.problems.fran import AOI_VECTOR_LIMIT, FRANProblem

    wider_count = (args.max_age + 2) ** cmc.n_sequences
    if wider_count > AOI_VECTOR_LIMIT:
        return status, (message + f"; the age limit {args.max_age} binds and was not probed beyond ((A+2)^s = "
                        f"{wider_count} AoI vectors > {AOI_VECTOR_LIMIT}): a larger --max-age may lower ε_S")
    wider = FRANProblem(cmc, args.max_mse, query=args.query, max_age=args.max_age + 1, bound=args.bound,
                        distance=prob.distance_kind).solve(args.method)
    if wider.objective is not None and sol.objective is not None and wider.objective < sol.objective * (1 - 1e-12):
        return "unbounded", (
            f"unbounded: the age limit binds and --max-age {args.max_age + 1} lowers ε_S from "
            f"{fmt_upper(sol.objective)} to {fmt_upper(wider.objective)} nats; best design within --max-age "
            f"{args.max_age} returned ({message})")
    return status, message + f"; the age limit {args.max_age} is reached, but --max-age {args.max_age + 1} does not lower ε_S"


def _cmd_fran(args) -> int:
    from policyopt.problems.fran import FRANProblem
    from policyopt.privacy.fran import PaperBoundWarning
    from policyopt.solvers.fran_solvers import fig5_baselines

    cmc, label = load_model(args)
    if args.method == "groups":
        return _cmd_fran_groups(args, cmc, label)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaperBoundWarning)  # the CLI prints its own warning below
        prob = FRANProblem(cmc, args.max_mse, query=args.query, max_age=args.max_age, bound=args.bound)
        if args.bound == "paper":  # after the problem is accepted: an error stays the only stderr line
            print("policyopt: warning: --bound paper uses Luo et al.'s (2025) eq. (15), which is NOT an upper bound of the leakage "
                  "(its proof uses ln(1 + x(e^y − 1)) ≤ xy, false for 0 < x < 1); the sound bound is the default",
                  file=sys.stderr)
        sol = prob.solve(args.method)
        baselines = fig5_baselines(prob)
        feasible = sol.decision is not None
        status, message = sol.status.value, sol.message
        if feasible and args.max_age > 0 and max(sol.decision["aoi"]) >= args.max_age and status == "optimal":
            status, message = _probe_age_limit(args, cmc, prob, sol, status, message)
    if args.bound == "sound":  # printed sound leakages are rounded outward (privacy.fran.sound_leakage_upper)
        from policyopt.privacy.fran import sound_leakage_upper

        def _up(v, e):
            return sound_leakage_upper(v, e, prob.d_k, args.max_age)

        sol_eps_s = _up(sol.objective, sol.decision["epsilon_c"] if feasible else None)
        for row in baselines.values():
            snd = row.get("sound") if isinstance(row, dict) else None
            if isinstance(snd, dict) and snd.get("epsilon_s") is not None:
                snd["epsilon_s"] = _up(snd["epsilon_s"], snd.get("epsilon_c"))
    else:
        sol_eps_s = sol.objective
    out = {
        "status": status,
        "aoi": list(sol.decision["aoi"]) if feasible else None,
        "epsilon_c": sol.decision["epsilon_c"] if feasible else None,
        "epsilon_s": sol_eps_s,
        "bound": args.bound,
        "mse": sol.values.get("mse"),
        "max_mse": args.max_mse,
        "max_age": args.max_age,
        "query": args.query,
        "method": sol.method,
        "model": label,
        "n_sequences": cmc.n_sequences,
        "n_states": cmc.n_states,
        "correlation_degree": cmc.correlation_degree,
        "d_k": prob.d_k,
        "sensitivity": prob.sensitivity,
        "distance": sol.values.get("distance"),
        "distance_kind": prob.distance_kind,
        "message": message,
        "baselines": baselines,
    }
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    what = {"sound": "sound bound ln(1 + Δ_k(e^{d(k)ε_C} − 1))" + (
                " with Δ_k ≤ the spectral upper bound (Zhang et al. 2024 eq. 55, matrix-free), not the exact Δ_k"
                if prob.distance_kind == "spectral" else ""), "paper": "Luo et al. (2025) eq. (15) d(k)Δ_kε_C — NOT an upper bound",
            "exact": "exact leakage of FRAN"}[args.bound]
    lines = [
        "FRAN design, problem P1 of Luo et al. (2025, eqs. 23–24)",
        f"model       : {label}; s = {cmc.n_sequences}, m = {cmc.n_states}, k = {cmc.correlation_degree}, "
        f"d(k) = {prob.d_k:g}, Δf = {prob.sensitivity:.6g} ({args.query})",
        f"status      : {status} ({sol.method}: {message})",
    ]
    if feasible:
        lines += [
            f"AoI vector  : {list(sol.decision['aoi'])} slots (each ≤ {args.max_age})",
            f"epsilon_c   : {sol.decision['epsilon_c']!r} nats (Laplace scale Δf/ε_C)",
            f"epsilon_s   : {fmt_upper(sol_eps_s)} nats ({what})",
            f"l_MSE       : {sol.values['mse']:.6g} ≤ {args.max_mse:g}",
        ]
    lines.append("baselines under the same MSE bound (ε_S in nats; sound | paper eq. 15):")
    for name, text in (("dp", "standard DP (no aging)"), ("ddp", "DDP (group sensitivity, no aging)"),
                       ("adp", "ADP (sequences as independent chains)"), ("csdp", "CSDP / FRAN (P1)")):
        row = baselines[name]
        snd, pap = row["sound"], row["paper"]
        s_txt = "n/a" if snd["epsilon_s"] is None else f"{fmt_upper(snd['epsilon_s'])} (A={snd['aoi']})"
        p_txt = "n/a" if pap["epsilon_s"] is None else f"{fmt_upper(pap['epsilon_s'])} (A={pap['aoi']})"
        if "note" in snd:
            p_txt += f"  ({snd['note']})"
        lines.append(f"  {text:<38} {s_txt:<26} | {p_txt}")
    lines.append("  (ADP ignores the coupling, so its number is not a CSDP guarantee for coupled sequences)")
    print("\n".join(lines))
    return 0


def _cmd_fran_groups(args, cmc, label) -> int:
    """``--method groups``: P1 by the exact group search (formulation policyopt.problems.fran_groups, back end
    policyopt.solvers.fran_groups, reached through the registry); no Fig. 5 baselines."""
    from policyopt.problems.fran_groups import GroupedFRANProblem

    if args.bound == "paper":
        print("policyopt: warning: --bound paper uses Luo et al.'s (2025) eq. (15), which is NOT an upper bound of the leakage "
              "(its proof uses ln(1 + x(e^y − 1)) ≤ xy, false for 0 < x < 1); the sound bound is the default",
              file=sys.stderr)
    prob = GroupedFRANProblem(cmc, args.max_mse, query=args.query, max_age=args.max_age, bound=args.bound)
    sol = prob.solve()
    out = {
        "status": sol.status.value,
        "aoi": list(sol.decision["aoi"]),
        "epsilon_c": sol.decision["epsilon_c"],
        "epsilon_s": sol.objective,
        "bound": args.bound,
        "mse": sol.values["mse"],
        "max_mse": args.max_mse,
        "max_age": args.max_age,
        "query": args.query,
        "method": sol.method,
        "model": label,
        "n_sequences": cmc.n_sequences,
        "n_states": cmc.n_states,
        "correlation_degree": cmc.correlation_degree,
        "d_k": prob.d_k,
        "sensitivity": prob.sensitivity,
        "distance": sol.values["distance"],
        "distance_kind": prob.distance_kind,
        "groups": sol.values["groups"],
        "message": sol.message,
        "baselines": None,
    }
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    what = ("sound bound ln(1 + Δ_k(e^{d(k)ε_C} − 1))" if args.bound == "sound"
            else "Luo et al. (2025) eq. (15) d(k)Δ_kε_C — NOT an upper bound")
    print("\n".join([
        "FRAN design, problem P1 of Luo et al. (2025, eqs. 23–24), group search",
        f"model       : {label}; s = {cmc.n_sequences}, m = {cmc.n_states}, k = {cmc.correlation_degree}, "
        f"d(k) = {prob.d_k:g}, Δf = {prob.sensitivity:.6g} ({args.query})",
        f"status      : {sol.status.value} ({sol.method}: {sol.message})",
        f"AoI vector  : {list(sol.decision['aoi'])} slots (each ≤ {args.max_age})",
        f"epsilon_c   : {sol.decision['epsilon_c']:.6g} nats (Laplace scale Δf/ε_C)",
        f"epsilon_s   : {fmt_upper(sol.objective)} nats ({what})",
        f"l_MSE       : {sol.values['mse']:.6g} ≤ {args.max_mse:g}",
        "baselines   : not computed with --method groups (they need the joint chain of all sequences)",
    ]))
    return 0
