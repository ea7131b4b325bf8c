"""The metadata a sweep output records next to its rows (``FILE.meta.json``, :mod:`policyopt.studies.sweep`): the
digests of its input files, the policyopt version, the Δ(t) sources and the guarantee settings of its models; a rerun
whose metadata differ is refused rather than resumed.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from policyopt.errors import fmt

__all__ = ["META_FORMAT", "file_sha256", "sweep_metadata", "meta_mismatch", "sweep_guarantee_settings", "guarantee_metadata",
           "max_tv_metadata"]


def sweep_guarantee_settings(model):
    """The :class:`~policyopt.studies.guarantee.GuaranteeSettings` of `model`'s points (its own, or the defaults for
    its deployment size I)."""
    if model.guarantee is not None:
        return model.guarantee
    from policyopt.studies.guarantee import GuaranteeSettings

    users = model.inputs.get("users") or getattr(model.population, "n_users", 1)
    return GuaranteeSettings.resolve(users=int(users))


def file_sha256(path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB blocks.

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("policyopt")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "unknown"


#: Version of ``FILE.meta.json``: 2 added ``guarantee`` (issue 32); a file of another version is not resumed.
META_FORMAT = 2


def sweep_metadata(input_files: dict | None = None, max_tv: Sequence | None = None,
                   guarantee: Sequence | None = None) -> dict:
    """The metadata a sweep output is tied to: policyopt's version, each input file's sha256, the Δ(t) source and the
    guarantee settings.

    Parameters
    ----------
    input_files : dict, optional
        Option name (e.g. ``"--data"``) → path of the file it named.  ``None`` values are skipped.
    max_tv : sequence of dict, optional
        The distinct Δ(t) sources of the sweep's models (:func:`max_tv_metadata`); default: the chains'.
    guarantee : sequence of dict, optional
        The distinct guarantee settings of the sweep's models (:func:`guarantee_metadata`); default: those of a
        model without settings (:func:`sweep_guarantee_settings`).

    Returns
    -------
    dict
        ``{"format": 2, "policyopt_version": str, "inputs": {option: {"path": str, "sha256": str}},
        "max_tv": [{"source": str, "level": float or None, "horizon": int or None}, ...],
        "guarantee": [{"markov_model": str, "privacy": str, "delta": float or None, "horizon": int,
        "accept_refuted": str or None}, ...]}``.

    Raises
    ------
    OSError
        If an input file cannot be read.
    """
    inputs = {}
    for option, path in sorted((input_files or {}).items()):
        if path is not None:
            inputs[option] = {"path": str(path), "sha256": file_sha256(path)}
    return {"format": META_FORMAT, "policyopt_version": _package_version(), "inputs": inputs,
            "max_tv": list(max_tv) if max_tv is not None else list(_CHAIN_MAX_TV),
            "guarantee": list(guarantee) if guarantee is not None else [_guarantee_entry(None)]}


def _guarantee_entry(gs) -> dict:
    """The resume identity of one model's guarantee settings: δ ``None`` stands for the default rule
    min(1e-6, 1/(10·I)) of each point's I (which the row's ``users`` fixes)."""
    if gs is None:
        from policyopt.studies.guarantee import GuaranteeSettings

        gs = GuaranteeSettings.resolve(users=1)
        return {"markov_model": gs.markov_model, "privacy": gs.privacy, "delta": None, "horizon": gs.horizon,
                "accept_refuted": None}
    return {"markov_model": gs.markov_model, "privacy": gs.privacy,
            "delta": float(gs.delta) if gs.dp_delta_source == "given" else None, "horizon": int(gs.horizon),
            "accept_refuted": gs.accept_refuted}


def guarantee_metadata(models: Sequence) -> list:
    """The distinct guarantee settings of `models`, as recorded in ``FILE.meta.json`` (``guarantee``), first-seen order.

    Each is ``{"markov_model", "privacy", "delta", "horizon", "accept_refuted"}``: the ``--markov-model`` asked for,
    the design target, δ of the model-free guarantee (``None``: the default min(1e-6, 1/(10·I)) of each point's
    deployment size I), the horizon H (slots) and the ``--accept-refuted`` reason (``None`` without).
    """
    out: list = []
    for m in models:
        entry = _guarantee_entry(sweep_guarantee_settings(m))
        if entry not in out:
            out.append(entry)
    return out


def _guarantee_text(entries, fields=None) -> str:
    def one(e):
        """The options text of one guarantee entry `e`."""
        parts = {
            "markov_model": f"--markov-model {e.get('markov_model')}",
            "privacy": f"--privacy {e.get('privacy')}",
            "delta": "the default δ = min(1e-6, 1/(10·I))" if e.get("delta") is None else f"--delta {e.get('delta'):g}",
            "horizon": f"--horizon {e.get('horizon')}",
            "accept_refuted": ("no --accept-refuted" if e.get("accept_refuted") is None else
                               f"--accept-refuted {fmt(e.get('accept_refuted'))}"),
        }
        return ", ".join(v for k, v in parts.items() if fields is None or k in fields)

    return " and ".join(one(e) for e in entries)


#: The Δ(t) source of a sweep whose metadata does not name one (the chains', as before sources existed).
_CHAIN_MAX_TV = ({"source": "chain", "level": None, "horizon": None},)


def max_tv_metadata(models: Sequence) -> list:
    """The distinct Δ(t) sources of `models`, as recorded in ``FILE.meta.json`` (``max_tv``), in first-seen order.

    Each is ``{"source": "chain" | "empirical:LEVEL", "level": LEVEL or None, "horizon": H or None}``.
    """
    out: list = []
    for m in models:
        emp = getattr(m, "empirical", None)
        entry = ({"source": "chain", "level": None, "horizon": None} if emp is None else
                 {"source": emp.spec, "level": float(emp.level), "horizon": int(emp.horizon)})
        if entry not in out:
            out.append(entry)
    return out


def _max_tv_text(entries) -> str:
    return " and ".join("the chains' Δ(t)" if e.get("source") == "chain" else
                        f"--max-tv {e.get('source')} (horizon {e.get('horizon')} slots)" for e in entries)


def meta_mismatch(old: dict, new: dict) -> str | None:
    """One-line description of the first difference between two metadata dicts, or None."""
    if old.get("policyopt_version") != new["policyopt_version"]:
        return f"policyopt {old.get('policyopt_version')!r} wrote its rows, this is policyopt {new['policyopt_version']!r}"
    if old.get("format") != new.get("format", META_FORMAT) or not isinstance(old.get("guarantee"), list):
        return ("its rows were written by an older policyopt sweep (metadata format "
                f"{old.get('format')}, without the guarantee settings), before every row stated the model-free guarantee "
                "and withheld ε* under a refuted Markov model")
    old_tv = old.get("max_tv") if isinstance(old.get("max_tv"), list) else list(_CHAIN_MAX_TV)
    new_tv = new.get("max_tv", list(_CHAIN_MAX_TV))
    if old_tv != new_tv:
        return f"its rows were designed with {_max_tv_text(old_tv)}, this run uses {_max_tv_text(new_tv)}"
    old_g, new_g = old["guarantee"], new.get("guarantee", [_guarantee_entry(None)])
    if old_g != new_g:
        fields = None
        if len(old_g) == len(new_g) == 1 and isinstance(old_g[0], dict):
            fields = [k for k in new_g[0] if old_g[0].get(k) != new_g[0][k]] or None
        return (f"its rows were designed with {_guarantee_text(old_g, fields)}, this run uses "
                f"{_guarantee_text(new_g, fields)}")
    old_in = old.get("inputs") if isinstance(old.get("inputs"), dict) else {}
    for option in sorted(set(old_in) | set(new["inputs"])):
        a, b = old_in.get(option), new["inputs"].get(option)
        if a is None or b is None:
            return f"its rows were computed {'without' if a is None else 'with'} {option}, this run is {'with' if a is None else 'without'} it"
        if not isinstance(a, dict) or a.get("sha256") != b["sha256"]:
            old_sha = a.get("sha256") if isinstance(a, dict) else None
            return (f"{option} {b['path']} has changed since its rows were computed "
                    f"(sha256 {str(old_sha)[:12]}… then, {b['sha256'][:12]}… now)")
    return None
