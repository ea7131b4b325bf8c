"""The Python path: top-level exports, reports that print as the CLI does, Solution.peak_risk, penalty units."""

from __future__ import annotations

import html.parser
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import policyopt
from policyopt import (
    MSEPenalty,
    Population,
    design_schedule,
    fit_population,
    two_state_chain,
)
from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_upper

POLICYOPT = str(Path(sys.executable).with_name("policyopt"))


def _two_state_report(**kw):
    return design_schedule(
        Population([two_state_chain(0.1, 0.1)], [20]),
        max_penalty=0.2,
        A_max=24,
        S_max=24,
        model_info={"source": "two-state chain two-state:p=0.1,q=0.1", "excluded_users": {}, "value_range_source": "model"},
        **kw,
    )


def test_every_exported_name_resolves_to_its_module_object():
    from policyopt.models.cmc import CouplingMarkovChain
    from policyopt.privacy.temporal import leakage
    from policyopt.problems.fran import FRANProblem
    from policyopt.problems.tpl_budget import BudgetAllocationProblem

    for name in policyopt.__all__:
        assert getattr(policyopt, name) is not None, name
    assert policyopt.FRANProblem is FRANProblem
    assert policyopt.BudgetAllocationProblem is BudgetAllocationProblem
    assert policyopt.leakage is leakage
    assert policyopt.CouplingMarkovChain is CouplingMarkovChain
    assert {"load_citylearn", "fit_population", "design_schedule", "discounted_loss", "corollary_schedule"} <= set(
        policyopt.__all__
    )
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        policyopt.no_such_thing  # noqa: B018


def test_report_str_is_the_cli_text():
    # The same problem through the command line and through Python: identical text but the wall time.
    cli = subprocess.run(
        [POLICYOPT, "schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", "20", "--max-penalty", "0.2",
         "--max-age", "24", "--max-interval", "24"],
        capture_output=True, text=True, check=True,
    ).stdout.rstrip("\n").splitlines()
    py = str(_two_state_report()).splitlines()
    assert cli[-1].startswith("wall time") and py[-1].startswith("wall time")
    # the command adds its plain-words explanation and posterior checks (studies.deployment) to the report
    command_only = ("meaning     :", "credible    :", "robust      :", "warning     :")
    assert py[:-1] == [line for line in cli[:-1] if not line.startswith(command_only)]
    assert py[0].startswith("policyopt schedule: peak age-dependent privacy risk")


def test_report_html_table_shows_the_rounded_up_risk():
    report = _two_state_report()
    text = report._repr_html_()

    class Cells(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.cells, self.tags = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

        def handle_data(self, data):
            self.cells.append(data)

    parser = Cells()
    parser.feed(text)
    assert parser.tags[0] == "table" and parser.tags.count("tr") >= 10
    row = dict(zip(parser.cells[::2], parser.cells[1::2]))
    assert row["status"] == report.status
    assert row["peak risk ε* (nats)"] == fmt_upper(report.peak_risk)
    assert float(row["peak risk ε* (nats)"]) >= report.peak_risk
    assert row["A (slots)"] == str(report.solution.decision["A"])


def test_solution_peak_risk_is_the_objective_of_schedule_problems_only():
    report = _two_state_report()
    sol = report.solution
    assert sol.objective_name == "peak_risk"
    assert sol.peak_risk == sol.objective == report.peak_risk
    assert report.no_aging.peak_risk == report.no_aging.objective
    assert "policyopt-solution" in sol._repr_html_() and repr(sol.objective) in sol._repr_html_()
    # an infeasible schedule problem: still a peak-risk problem, without an incumbent
    infeasible = design_schedule(Population([two_state_chain(0.1, 0.1)], [20]), max_penalty=1e-4, A_max=4, S_max=4)
    assert infeasible.status == "infeasible" and infeasible.solution.peak_risk is None
    # a budget allocation's objective is a noise variance, not a peak risk
    alloc = policyopt.BudgetAllocationProblem([[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]], 1.0, 5).solve(
        "upper-bound"
    )
    with pytest.raises(AttributeError, match="not a peak risk .*use `objective`"):
        alloc.peak_risk  # noqa: B018
    assert not hasattr(alloc, "peak_risk")


def test_mse_penalty_carries_the_unit_of_the_data():
    df = policyopt.load_citylearn()
    assert df.attrs["unit"] == "kWh"
    small = df[df["user"].isin(["Building_1", "Building_2"]) & (df["time"] < 500)].copy()
    fitted = fit_population(small, 4)
    assert fitted.population.value_unit == "kWh"
    assert MSEPenalty(fitted.population).unit == "kWh^2"
    report = design_schedule(fitted.population, max_penalty=2.0, A_max=6, S_max=6)
    assert report.to_dict()["model"]["penalty_unit"] == "kWh^2"
    assert "kWh^2" in str(report)
    # an explicit unit wins; a table without a unit gives none
    assert fit_population(small, 4, unit="Wh").population.value_unit == "Wh"
    assert MSEPenalty(fitted.population, unit="MWh^2").unit == "MWh^2"
    plain = pd.DataFrame({"user": ["a"] * 60, "time": np.arange(60), "value": np.tile([0.0, 1.0, 2.0], 20)})
    assert fit_population(plain, 3).population.value_unit == ""
    assert MSEPenalty(fit_population(plain, 3).population).unit == ""


def test_unit_arguments_are_checked():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    with pytest.raises(InvalidInputError, match=r"`unit` must be a string such as 'kWh\^2', got 5"):
        MSEPenalty(pop, unit=5)
    with pytest.raises(InvalidInputError, match="`value_unit` must be a string such as 'kWh', got 1"):
        Population([two_state_chain(0.1, 0.1)], [20], value_unit=1)
    plain = pd.DataFrame({"user": ["a"] * 60, "time": np.arange(60), "value": np.tile([0.0, 1.0, 2.0], 20)})
    with pytest.raises(InvalidInputError, match="`unit` must be a string such as 'kWh', got 3"):
        fit_population(plain, 3, unit=3)


def test_leakage_str_is_the_cli_text_without_the_command_level_lines():
    # source: Cao et al. (2019), Fig. 8 setting (P_B, P_F), constant budget 0.1 over 10 steps
    cli = subprocess.run(
        [POLICYOPT, "tpl", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--epsilon", "0.1", "--horizon", "10"],
        capture_output=True, text=True, check=True,
    ).stdout.rstrip("\n").splitlines()
    res = policyopt.leakage([[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]], [0.1] * 10)
    py = str(res).splitlines()
    expected = [line for line in cli if not line.startswith(("guarantee:", "model-free:", "model    :", "supremum :", "wall time:"))]
    assert py == expected
    assert any(line.startswith("supremum :") for line in cli)
    table = res._repr_html_()
    assert table.startswith("<table") and f"max TPL = {fmt_upper(res.tpl_level)} nats" in table
    assert table.count("<tr>") == 1 + 8  # header, the first five and the last three steps
