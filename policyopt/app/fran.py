"""The coupled chain ``policyopt fran`` designs for, below the command line: from a ``--model`` JSON file, the
two-binary example (Luo et al. 2025, eq. (25)) or bundled homes (:func:`cmc_model`), with the limits on its size.

:func:`cmc_model` takes `args`, the parsed ``fran`` options (``model``, ``two_binary``, ``homes``, ``states``);
errors name the command-line options.
"""

from __future__ import annotations

import json

from policyopt.errors import InvalidInputError, fmt

__all__ = ["DEFAULT_STATES", "MAX_ABS_VALUE", "MAX_HOMES_SNAPSHOTS", "MAX_JSON_DEPTH", "MAX_SEQUENCES", "cmc_model"]

#: States per home fitted by --homes when --states is not given.
DEFAULT_STATES = 2
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


def cmc_model(args):
    """The coupled chain (CMC) of ``policyopt fran`` from --model, --two-binary or --homes/--states (data)."""
    from policyopt.models.cmc import CouplingMarkovChain, two_binary_cmc
    from policyopt.models.cmc_fit import fit_cmc_from_readings

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
