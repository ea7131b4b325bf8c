"""``check-model``, ``backtest`` and ``ledger`` from Python: the same JSON object and the same text as the command.

Each case runs the installed command as a subprocess and the Python call (:func:`policyopt.check_deployment_model`,
:func:`policyopt.backtest_deployment`, :func:`policyopt.audit_ledger`) in this process with the same options, and
compares the command's stdout with ``to_dict()`` (field for field, wall times aside) and ``str()`` (line for line,
the wall-time line aside).  The options classes take the command line's defaults, checked here against its parser.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from _cli import ok_json, run_cli, strict_json, without_times as _without_times

import policyopt as po
from policyopt.app.backtest import BacktestOptions
from policyopt.app.check_data import CheckDataOptions
from policyopt.app.check_model import CheckModelOptions
from policyopt.app.ledger import LedgerOptions
from policyopt.app.publish import PublishOptions
from policyopt.app.sweep import SweepOptions
from policyopt.app.tpl import TplBudgetOptions, TplOptions
from policyopt.errors import InvalidInputError

CSV = "user,time,value\n" + "".join(f"u{u},{t},{((t * 7 + u * 3) % 5) * 0.4 + (t // 24 % 2) * 0.1:.2f}\n"
                                    for t in range(600) for u in range(3))


def _lines(text: str) -> list[str]:
    """The text's lines but the wall time's (the check-model text states its stages' seconds: those dropped too)."""
    return [line for line in text.strip().split("\n") if not line.startswith("wall time") and " s)" not in line]


def _same(report, command: str, argv: list) -> None:
    assert isinstance(report, po.CommandReport) and report.command == command
    assert _without_times(report.to_dict()) == _without_times(ok_json(command, *argv))
    text = run_cli(command, *argv)
    assert _lines(str(report)) == _lines(text.stdout)
    html = report._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == len(str(report).splitlines())
    assert report.warnings == report.to_dict().get("warnings", [])


def test_check_model_from_python_is_the_command(tmp_path):
    data = tmp_path / "r.csv"
    data.write_text(CSV)
    argv = ["--data", data, "--states", "2", "--max-lag", "12", "--draws", "19", "--boot", "20"]
    report = po.check_deployment_model(data=str(data), states=2, max_lag=12, draws=19, boot=20)
    _same(report, "check-model", argv)
    assert report.fields["markov_test"]["lags"][-1] <= 12 and report.fields["model"] == "chain"


def test_backtest_from_python_is_the_command(tmp_path):
    argv = ["--max-rmse", "0.19", "--max-age", "24", "--max-interval", "24"]
    report = po.backtest_deployment(max_rmse=0.19, max_age=24, max_interval=24)
    _same(report, "backtest", argv)
    series = report.extras["series"]
    assert len(series["time"]) == len(series["mse"]) > 1000 and "series" not in report.fields
    assert report.guarantee["kind"] in ("model-based", "model-free")


def test_ledger_from_python_is_the_command(tmp_path):
    data, led = tmp_path / "s.csv", tmp_path / "l.db"
    data.write_text(CSV)
    run_cli("publish", "--A", "0", "--S-bar", "50", "--epsilon-c", "1", "--value-range", "0:2", "--model",
            "two-state:p=0.1,q=0.1", "--data", data, "--ledger", led)
    report = po.audit_ledger(led, at=400)
    _same(report, "ledger", ["--ledger", led, "--at", "400"])
    assert report.fields["at"] == 400 and report.fields["released"] == 9  # slots 0, 50, ..., 400
    assert report.guarantee["kind"] == "model-based" and math.isfinite(report.fields["peak_risk"])


@pytest.mark.parametrize("cls, command", [(CheckModelOptions, "check-model"), (BacktestOptions, "backtest"),
                                          (LedgerOptions, "ledger"), (PublishOptions, "publish"),
                                          (SweepOptions, "sweep"), (TplOptions, "tpl"),
                                          (TplBudgetOptions, "tpl-budget"), (CheckDataOptions, "check-data")])
def test_options_are_the_command_lines_with_its_defaults(cls, command):
    """Every option of the command is a field with the parser's default, and every field an option (sweep's
    ``vary`` is the parsed mapping of its repeated ``--vary`` texts: empty by default)."""
    from policyopt.cli.main import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices[command]
    dests = {a.dest: a.default for a in sub._actions if a.dest not in ("help", "json")}
    fields = {f.name: (f.default_factory() if f.default is dataclasses.MISSING else f.default)
              for f in dataclasses.fields(cls)}
    if command == "sweep":
        assert dests.pop("vary") == [] and fields.pop("vary") == {}
    assert fields == dests


@pytest.mark.parametrize("cls, field, bad", [
    (CheckModelOptions, "states", 1), (CheckModelOptions, "states", 201), (CheckModelOptions, "level", 1.0),
    (CheckModelOptions, "draws", 0), (CheckModelOptions, "boot", 19), (CheckModelOptions, "smoothing", -0.1),
    (CheckModelOptions, "max_lag", 0), (CheckModelOptions, "value_range", (2, 1)),
    (BacktestOptions, "train_fraction", 0.0), (BacktestOptions, "users", 0), (BacktestOptions, "max_age", -1),
    (BacktestOptions, "max_interval", 0), (BacktestOptions, "max_penalty", 0.0), (BacktestOptions, "max_rmse", 1e151),
    (BacktestOptions, "states", 201), (BacktestOptions, "horizon", 0), (BacktestOptions, "delta", 1.0),
    (LedgerOptions, "at", -1), (LedgerOptions, "states", 1), (LedgerOptions, "ci_level", 0.0),
])
def test_a_value_the_command_line_refuses_is_refused_by_keyword(cls, field, bad, tmp_path):
    """The same bounds as the parser's: the value it refuses (as text) is refused here, naming the keyword."""
    from policyopt.cli.main import build_parser

    command = cls.COMMAND
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    (action,) = [a for a in sub._actions if a.dest == field]
    text = f"{bad[0]}:{bad[1]}" if isinstance(bad, tuple) else repr(bad)
    with pytest.raises(Exception):
        action.type(text)
    required = {"ledger": str(tmp_path / "l.db")} if cls is LedgerOptions else {}
    with pytest.raises(InvalidInputError, match=f"`{field}`"):
        cls(**{**required, field: bad})


def test_unknown_keywords_and_missing_ledger_are_refused():
    with pytest.raises(InvalidInputError, match="check_deployment_model got unknown keyword 'levle'"):
        po.check_deployment_model(levle=0.9)
    with pytest.raises(InvalidInputError, match="backtest_deployment got unknown keyword"):
        po.backtest_deployment(max_agee=3)
    with pytest.raises(InvalidInputError, match="`ledger` is required"):
        LedgerOptions()
    with pytest.raises(InvalidInputError, match="`level` has a default"):
        CheckModelOptions(level=None)
    with pytest.raises(InvalidInputError, match="not both"):
        BacktestOptions(max_penalty=0.01, max_rmse=0.1)


def _noise_free(obj):
    """A publish report without what the Laplace noise draws (each release's value and error bars)."""
    if isinstance(obj, dict):
        return {k: _noise_free(v) for k, v in obj.items() if k not in ("value", "ci_low", "ci_high")}
    if isinstance(obj, list):
        return [_noise_free(v) for v in obj]
    return obj


def test_publish_from_python_is_the_command(tmp_path, monkeypatch):
    """The same releases due, skips, accounting and text (the noise aside): one ledger by the command, one by Python,
    each in its own folder under the same relative names."""
    import _warm_cli

    argv = ["--A", "0", "--S-bar", "50", "--epsilon-c", "1", "--value-range", "0:2", "--model",
            "two-state:p=0.1,q=0.1", "--data", "s.csv", "--ledger", "l.db"]
    for name in ("cli", "python"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "s.csv").write_text(CSV)
    cli = _warm_cli.run(["publish", *argv, "--json"], cwd=tmp_path / "cli", timeout=300)
    assert cli.returncode == 0, cli.stderr
    monkeypatch.chdir(tmp_path / "python")
    report = po.publish_releases("l.db", A=0, S_bar=50, epsilon_c=1.0, value_range=(0, 2),
                                 model="two-state:p=0.1,q=0.1", data="s.csv")
    results = [_noise_free(_without_times(strict_json(cli.stdout))), _noise_free(_without_times(report.to_dict()))]
    assert results[0] == results[1]
    assert report.fields["released"] == 12 and report.command == "publish"  # slots 0, 50, ..., 550
    again = po.publish_releases("l.db", A=0, S_bar=50, epsilon_c=1.0, value_range=(0, 2),
                                model="two-state:p=0.1,q=0.1", data="s.csv")
    assert again.fields["released"] == 0 and "nothing due" in str(again)  # resumed: no release redrawn
    with pytest.raises(InvalidInputError, match="`ledger` is required"):
        po.PublishOptions(A=0)


def test_sweep_from_python_is_the_command(tmp_path):
    argv = ["--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.01,0.02,0.05", "--vary", "users=50,100",
            "--max-age", "12", "--max-interval", "12"]
    cli = ok_json("sweep", *argv, "--out", tmp_path / "a.csv")
    report = po.sweep_designs(chain="two-state:p=0.1,q=0.1", max_penalty=[0.01, 0.02, 0.05], vary={"users": [50, 100]},
                              max_age=12, max_interval=12, out=str(tmp_path / "b.csv"))
    strip = lambda d: {k: v for k, v in _without_times(d).items() if k not in ("out", "jsonl")}  # noqa: E731
    assert strip(report.to_dict()) == strip(cli) and report.fields["points"] == 6
    assert len(report.extras["rows"]) == 6 and report.fields["varied"] == {"users": [50, 100]}
    text = run_cli("sweep", *argv, "--out", tmp_path / "a.csv").stdout  # resumed: every point read back
    assert [ln for ln in _lines(str(report)) if "b.csv" not in ln and "computed" not in ln] == \
        [ln for ln in _lines(text) if "a.csv" not in ln and "computed" not in ln]
    with pytest.raises(InvalidInputError, match="--vary states applies to data"):
        po.sweep_designs(chain="two-state:p=0.1,q=0.1", max_penalty=[0.01], vary={"states": [2, 3]},
                         out=str(tmp_path / "c.csv"))
    with pytest.raises(InvalidInputError, match="`max_penalty` is required"):
        SweepOptions(out="x.csv")


def test_tpl_and_tpl_budget_from_python_are_the_commands(tmp_path):
    """Matrices as arrays and budgets as numbers in Python; inline rows and a file on the command line."""
    pb, pf = [[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]]
    budgets = tmp_path / "b.txt"
    budgets.write_text("0.1,0.2,0.1,0.3\n")
    cli = ["--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9"]
    _same(po.temporal_leakage(pb=pb, pf=pf, budgets=[0.1, 0.2, 0.1, 0.3]), "tpl", [*cli, "--budgets", budgets])
    _same(po.temporal_leakage(pb=pb, pf=pf, epsilon=0.1, horizon=10), "tpl", [*cli, "--epsilon", "0.1", "--horizon", "10"])
    report = po.allocate_tpl_budgets(pb=pb, pf=pf, alpha=1.0, horizon=5)
    _same(report, "tpl-budget", [*cli, "--alpha", "1", "--horizon", "5"])
    assert report.fields["method"] == "quantification"
    with pytest.raises(InvalidInputError, match="`budgets` must be 1 to"):
        po.temporal_leakage(pb=pb, pf=pf, budgets=[0.1, -1.0])
    with pytest.raises(InvalidInputError, match="`alpha` is required"):
        TplBudgetOptions(horizon=5)


def test_check_data_from_python_is_the_command(tmp_path):
    data = tmp_path / "r.csv"
    data.write_text(CSV)
    report = po.check_readings(data=str(data), states=2)
    _same(report, "check-data", ["--data", data, "--states", "2"])
    assert report.fields["users"] == 3 and report.fields["slots"] == 600
