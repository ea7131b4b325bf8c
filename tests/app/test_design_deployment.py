"""``policyopt.design_deployment`` is ``policyopt schedule`` from Python: the same JSON object, the same text.

Each case runs the installed command as a subprocess and the Python call in this process with the same options, and
compares the command's stdout with ``to_dict()`` / ``str()`` of the report: field for field (wall times aside) and
line for line (the wall-time line aside).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from _cli import ok_json, run_cli, without_times as _without_times

import policyopt as po
from policyopt.app.design_options import DesignOptions
from policyopt.errors import InvalidInputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# (command-line options, the same as keywords)
CASES = {
    "bundled, model-free design with a backtest": (
        ["--privacy", "model-free", "--max-rmse", "0.19", "--max-age", "24", "--max-interval", "24", "--backtest", "0.5"],
        dict(privacy="model-free", max_rmse=0.19, max_age=24, max_interval=24, backtest=0.5),
    ),
    "given chain": (
        ["--chain", "two-state:p=0.1,q=0.1", "--users", "100", "--max-penalty", "0.0195"],
        dict(chain="two-state:p=0.1,q=0.1", users=100, max_penalty=0.0195),
    ),
    "own readings, data's Δ(t) band": (
        ["--data", str(EXAMPLES / "readings.csv"), "--states", "3", "--max-age", "12", "--max-interval", "12",
         "--max-tv", "empirical"],
        dict(data=str(EXAMPLES / "readings.csv"), states=3, max_age=12, max_interval=12, max_tv="empirical"),
    ),
}


def _without_wall_time(text: str) -> list[str]:
    return [line for line in text.strip().split("\n") if not line.startswith("wall time")]


@pytest.mark.parametrize("case", list(CASES))
def test_python_report_is_the_command_output(case):
    argv, keywords = CASES[case]
    report = po.design_deployment(**keywords)
    cli_json = ok_json("schedule", *argv)
    assert _without_times(report.to_dict()) == _without_times(cli_json)
    assert "wall_time_s" in report.to_dict()
    text = run_cli("schedule", *argv)
    assert text.returncode == 0, text.stderr
    assert _without_wall_time(str(report)) == _without_wall_time(text.stdout)


def test_report_fields_and_summary():
    report = po.design_deployment(chain="two-state:p=0.1,q=0.1", users=100, max_penalty=0.0195)
    d = report.to_dict()
    assert report.status == d["status"] == "optimal"
    assert report.schedule == {"A": d["A"], "S_bar": d["S_bar"], "epsilon_c": d["epsilon_c"]}
    assert report.guarantee == d["guarantee"] and report.guarantee["kind"] == "model-based"  # an assumed given chain
    assert report.plot_error is None
    assert repr(report).startswith("DeploymentReport(status='optimal', A=")
    d["A"] = -1  # to_dict() is a copy
    assert report.to_dict()["A"] == report.schedule["A"] >= 0
    assert "peak risk   : ε* = " in str(report) and math.isfinite(report.fields["peak_risk"])
    html = report._repr_html_()  # a notebook's table: a row per line of the text, the label a header cell
    assert html.count("<tr>") == len(str(report).splitlines()) and "<th style='text-align:left'>peak risk</th>" in html


@pytest.mark.parametrize("keywords, phrase", [
    (dict(max_agee=3), "unknown keyword 'max_agee'"),
    (dict(max_age=-1), "`max_age` must be an integer from 0 to 100000, got -1"),
    (dict(max_age=2.5), "`max_age` must be an integer from 0 to 100000, got 2.5"),
    (dict(max_interval=True), "`max_interval` must be an integer from 1 to 100000, got True"),
    (dict(users=0), "`users` must be an integer from 1 to 1000000000, got 0"),
    (dict(value_range=(3, 1)), "`value_range` must be finite numbers with LO < HI, got (3, 1)"),
    (dict(method="simplex"), "`method` must be one of exact, heuristic, cvxpy, pyomo, all, got 'simplex'"),
    (dict(penalty="mse"), "`penalty` must be one of readings, readings-upper, readings-auto, chain, got 'mse'"),
    (dict(credible=1.0), "`credible` must be a probability strictly between 0 and 1, got 1.0"),
    (dict(delta=0), "`delta` must be a probability strictly between 0 and 1, got 0"),
    (dict(max_penalty=-0.1), "`max_penalty` must be a finite number > 0 and ≤ 1e+300, got -0.1"),
    (dict(max_rmse=float("nan")), "`max_rmse` must be a finite number ≥ 1e-150 and ≤ 1e+150, got nan"),
    (dict(max_penalty=0.1, max_rmse=0.3), "give `max_penalty` (0.1) or `max_rmse` (0.3), not both"),
    (dict(chain="two-state:p=0.1,q=0.1", data="x.csv"), "give one model source, not `data` and `chain`"),
    (dict(data=3), "`data` must be text (a path or a specification), got 3"),
    (dict(relax="yes"), "`relax` must be True or False, got 'yes'"),
])
def test_bad_keywords_are_refused_by_name(keywords, phrase):
    with pytest.raises(InvalidInputError) as exc:
        po.design_deployment(**keywords)
    assert phrase in str(exc.value)


def test_options_refused_together_name_the_option():
    """Checks across options are the command's own (the message names the option as the command line does)."""
    with pytest.raises(InvalidInputError, match="--states applies to --data"):
        po.design_deployment(chain="two-state:p=0.1,q=0.1", states=3)


def test_options_from_a_parsed_command_line():
    from policyopt.cli.main import build_parser

    args = build_parser().parse_args(["schedule", "--chain", "two-state:p=0.2,q=0.3", "--max-age", "7", "--json"])
    options = DesignOptions.from_namespace(args)
    assert options.chain == "two-state:p=0.2,q=0.3" and options.max_age == 7 and options.max_interval == 168
    assert not hasattr(options, "json")
    assert options == DesignOptions(chain="two-state:p=0.2,q=0.3", max_age=7)
