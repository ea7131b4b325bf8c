"""`policyopt fran`: JSON contract, paper-bound warning, model files, one-line errors."""

from __future__ import annotations

import re

import json
import math

import pytest

from policyopt.cli.main import main

FIG5 = ["--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.8"]  # source: Luo et al. (2025), Section VII-D


def run_json(capsys, *args):
    assert main(["fran", *args, "--json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_json_contract_fig5(capsys):
    out, err = run_json(capsys, *FIG5)
    assert err == ""
    for key in ("aoi", "epsilon_c", "epsilon_s", "bound", "mse", "max_mse", "status", "baselines"):
        assert key in out
    # the optimum sits at the age limit and --max-age 11 lowers ε_S: unbounded, as `schedule` says (issue 12)
    assert out["bound"] == "sound" and out["status"] == "unbounded" and "--max-age 11 lowers ε_S" in out["message"]
    assert out["aoi"] == [10, 10] and out["max_mse"] == 0.8
    assert out["mse"] == pytest.approx(0.8, rel=1e-12)
    # sound bound with d(2) = 2 (Luo et al. 2025, eq. 45 first line) at the closed-form ε_C
    # (rounded outward by privacy.fran.sound_leakage_upper: ≥ the computed value, within 1e-11 of it)
    computed = math.log1p(out["distance"] * math.expm1(2 * out["epsilon_c"]))
    assert computed < out["epsilon_s"] == pytest.approx(computed, rel=1e-11)
    assert set(out["baselines"]) == {"dp", "ddp", "adp", "csdp"}
    dp = out["baselines"]["dp"]["sound"]["epsilon_s"]
    assert math.sqrt(0.5 / 0.8) < dp == pytest.approx(math.sqrt(0.5 / 0.8), rel=1e-11)
    assert out["baselines"]["csdp"]["sound"]["epsilon_s"] == pytest.approx(out["epsilon_s"], rel=1e-11)


def test_paper_bound_warns_and_methods_agree(capsys):
    out, err = run_json(capsys, *FIG5, "--bound", "paper", "--method", "scip")
    assert "warning" in err and "NOT an upper bound" in err and len(err.strip().splitlines()) == 1
    assert out["bound"] == "paper"
    assert out["epsilon_s"] == pytest.approx(2 * out["distance"] * out["epsilon_c"], rel=1e-12)
    cvx, _ = run_json(capsys, *FIG5, "--bound", "paper", "--method", "cvxpy")
    assert cvx["epsilon_s"] == pytest.approx(out["epsilon_s"], rel=1e-6)


def test_exact_bound_small(capsys):
    out, _ = run_json(capsys, *FIG5[:2], "--max-mse", "0.5", "--max-age", "3", "--bound", "exact")
    snd, _ = run_json(capsys, *FIG5[:2], "--max-mse", "0.5", "--max-age", "3")
    assert out["bound"] == "exact" and out["epsilon_s"] <= snd["epsilon_s"]


def test_model_file_matches_two_binary(tmp_path, capsys):
    spec = {"transitions": [[0.7, 0.3], [0.3, 0.7]], "coupling": [[0.5, 0.5], [0.5, 0.5]], "n_sequences": 2,
            "state_values": [0, 1]}
    path = tmp_path / "cmc.json"
    path.write_text(json.dumps(spec))
    a, _ = run_json(capsys, "--model", str(path), "--max-mse", "0.8")
    b, _ = run_json(capsys, *FIG5)
    assert a["aoi"] == b["aoi"] and a["epsilon_s"] == pytest.approx(b["epsilon_s"], rel=1e-12)


def test_bundled_homes(capsys):
    out, _ = run_json(capsys, "--homes", "Building_1,Building_2", "--states", "2", "--max-mse", "0.5", "--max-age", "3")
    assert out["status"] == "optimal" and len(out["aoi"]) == 2 and out["n_states"] == 2


def test_text_output_rounds_up(capsys):
    assert main(["fran", *FIG5]) == 0
    text = capsys.readouterr().out
    assert "AoI vector  : [10, 10] slots" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("epsilon_s"))
    assert float(line.split(":")[1].split()[0]) >= 3.144515069e-4


@pytest.mark.parametrize(
    "args,pattern",
    [
        (["--two-binary", "p=0.3,q=0.3", "--max-mse", "0.8"], r"--two-binary is missing lambda"),
        (["--two-binary", "p=0.3,q=1.3,lambda=0.5", "--max-mse", "0.8"], r"q must lie in \[0, 1\]"),
        (["--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0"], r"--max-mse must be a positive"),
        (["--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.8", "--states", "3"], r"--states applies only to --homes"),
        (["--max-mse", "0.8"], r"one of the arguments --model --two-binary --homes is required"),
        (["--homes", "Building_1,Nowhere", "--max-mse", "0.8"], r"`users` not found in the data: \['Nowhere'\]"),
    ],
)
def test_errors_are_one_line(capsys, args, pattern):
    import re

    try:
        code = main(["fran", *args])
    except SystemExit as exc:  # argparse usage errors exit 2 with one line
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err)


def test_bad_model_files(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"transitions": [[0.7, 0.4], [0.3, 0.7]], "coupling": [[1, 0], [0, 1]], "n_sequences": 2}))
    assert main(["fran", "--model", str(bad), "--max-mse", "0.8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("policyopt: error: --model") and "row 0 sums to 1.1" in err and len(err.splitlines()) == 1
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"transitions": [[1.0]], "coupling": [[1.0]], "lambda": 2}))
    assert main(["fran", "--model", str(extra), "--max-mse", "0.8"]) == 2
    assert "unknown keys ['lambda']" in capsys.readouterr().err
    assert main(["fran", "--model", str(tmp_path / "missing.json"), "--max-mse", "0.8"]) == 2
    assert re.search(r"--model file not found: '.*missing.json'", capsys.readouterr().err)
    garbage = tmp_path / "g.json"
    garbage.write_text("{not json")
    assert main(["fran", "--model", str(garbage), "--max-mse", "0.8"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def _thirteen(tmp_path):
    import numpy as np

    lam = 0.6 * np.eye(13) + 0.4 * np.roll(np.eye(13), 1, axis=1)
    path = tmp_path / "cmc13.json"
    path.write_text(json.dumps({"transitions": [[0.50025, 0.49975], [0.49975, 0.50025]], "n_sequences": 13,
                                "coupling": lam.tolist()}))
    return str(path)


@pytest.mark.slow
def test_beyond_exact_limit_sound_uses_spectral_bound(tmp_path, capsys):
    from policyopt.models.cmc import CouplingMarkovChain

    path = _thirteen(tmp_path)
    out, err = run_json(capsys, "--model", path, "--max-mse", "0.1", "--max-age", "1")
    assert err == "" and out["n_sequences"] == 13 and out["bound"] == "sound"
    assert out["distance_kind"] == "spectral" and out["status"] == "feasible"
    assert "spectral upper bound" in out["message"] and "not exact" in out["message"]
    assert out["aoi"] == [1] * 13
    spec = json.loads(open(path).read())
    delta = CouplingMarkovChain(spec["transitions"], spec["coupling"], n_sequences=13).spectral_max_tv(1)
    assert out["distance"] == delta  # source: Zhang et al. (2024) eq. (55), matrix-free certificate
    computed = math.log1p(delta * math.expm1(13 * out["epsilon_c"]))  # rounded outward in the output
    assert computed < out["epsilon_s"] == pytest.approx(computed, rel=1e-11)
    assert out["baselines"]["csdp"]["paper"]["epsilon_s"] is None
    assert main(["fran", "--model", path, "--max-mse", "0.1", "--max-age", "1"]) == 0
    text = capsys.readouterr().out
    assert "spectral upper bound" in text and "status      : feasible" in text


@pytest.mark.parametrize("extra,pattern", [
    (["--bound", "paper"], r"`bound`='paper' needs the exact Δ_k .* above the exact limit 4096"),
    (["--bound", "exact"], r"`bound`='exact' needs the exact Δ_k .* above the exact limit 4096"),
    (["--query", "max"], r"`query`='max' needs the exact aged joint law"),
])
def test_beyond_exact_limit_other_bounds_are_clear_errors(tmp_path, capsys, extra, pattern):
    import re

    code = main(["fran", "--model", _thirteen(tmp_path), "--max-mse", "0.1", "--max-age", "1", *extra])
    assert code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.search(pattern, lines[0])
