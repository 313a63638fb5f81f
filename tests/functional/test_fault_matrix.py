"""A bounded subset of the fault matrix (tests/functional/_matrix.py): one case per kind of
fault at the calls where deploy, update, destroy and adapter registration used to break, at
the role, scaling, dashboard and alarm calls, plus two runs at once of each.
``python benchmarks/fault_matrix.py`` runs every case."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from . import _matrix as matrix

# (scenario, fault, operation, a piece of the resource name or key)
SUBSET = [
    ("deploy", "lost", "CreateEndpoint", ""),
    ("deploy", "lost", "CreateInferenceComponent", "docqa-legal"),
    ("deploy", "failed", "CreateInferenceComponent", "docqa-medical"),
    ("deploy", "5xx", "PutObject", "/model/"),
    ("deploy", "lost", "PutObject", "lease.json"),
    ("deploy", "ctrl-c", "CreateInferenceComponent", "docqa-base"),
    ("deploy", "ctrl-c-twice", "CreateEndpoint", ""),
    ("update", "failed", "UpdateInferenceComponent", "docqa-base"),
    ("update", "failed", "UpdateEndpoint", ""),
    ("update", "lost", "UpdateEndpoint", ""),
    ("update", "lost", "DeleteInferenceComponent", "docqa-medical"),
    ("update", "failed", "CreateInferenceComponent", "docqa-tax"),
    ("update", "ctrl-c", "UpdateInferenceComponent", "docqa-legal"),
    ("update", "ctrl-c-twice", "UpdateEndpoint", ""),
    ("destroy", "lost", "DeleteEndpoint", ""),
    ("destroy", "ctrl-c", "DeleteInferenceComponent", "docqa-base"),
    ("destroy", "ctrl-c-twice", "DeleteEndpoint", ""),
    ("register", "failed", "CreateInferenceComponent", "docqa-extra"),
    # the built-in steps: execution role, autoscaling, dashboard and alarms
    ("deploy", "lost", "CreateRole", ""),
    ("deploy", "ctrl-c", "PutScalingPolicy", ""),
    ("deploy", "5xx", "PutDashboard", ""),
    ("update", "5xx", "RegisterScalableTarget", ""),
    ("update", "ctrl-c", "DeleteScalingPolicy", ""),
    ("update", "lost", "DeleteAlarms", ""),
    ("update", "ctrl-c-twice", "PutMetricAlarm", ""),
    ("destroy", "ctrl-c", "DeregisterScalableTarget", ""),
    ("destroy", "lost", "DeleteRole", ""),
    ("destroy", "5xx", "DeleteDashboards", ""),
    ("register", "lost", "CreateInferenceComponent", "docqa-extra"),
]


@functools.cache
def _reference(scenario: str) -> Any:
    return matrix.reference(scenario)


def _target(scenario: str, operation: str, piece: str) -> matrix.Target:
    _, _, targets = _reference(scenario)
    return next(t for t in targets if t.operation == operation and piece in (t.name or ""))


def _check(outcome: matrix.Outcome) -> None:
    where = f"{outcome.case.label}: final {outcome.final}\n{outcome.message}"
    assert outcome.traceback is None, where + "\n" + outcome.traceback
    assert outcome.final in ("old", "new", "partial"), where
    assert outcome.orphans == [], where
    assert outcome.lost == [], where
    assert outcome.converged, where


# one case per operation runs in the fast tier (-m "not slow"), every case in the full suite
FAST = {("deploy", "lost", "CreateEndpoint", ""), ("update", "failed", "UpdateEndpoint", ""),
        ("destroy", "ctrl-c", "DeleteInferenceComponent", "docqa-base")}


@pytest.mark.parametrize("scenario,fault,operation,piece",
                         [pytest.param(*case, marks=() if case in FAST else pytest.mark.slow)
                          for case in SUBSET],
                         ids=[f"{s}-{f}-{o}-{p.strip('/')}" for s, f, o, p in SUBSET])
def test_fault_matrix_case_survives(scenario: str, fault: str, operation: str,
                                    piece: str) -> None:
    old, new, _ = _reference(scenario)
    outcome = matrix.run_case(matrix.Case(scenario, fault, _target(scenario, operation, piece)),
                              old, new)
    assert outcome.fired, f"{outcome.case.label} never happened"
    _check(outcome)


def test_every_fast_case_is_a_case_of_the_subset() -> None:
    """A case renamed in SUBSET but not in FAST would leave its operation out of the fast tier."""
    assert FAST <= set(SUBSET), FAST - set(SUBSET)
    assert {scenario for scenario, *_ in FAST} == {"deploy", "update", "destroy"}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", matrix.SCENARIOS)
def test_two_runs_at_once_do_not_break_each_other(scenario: str) -> None:
    old, new, _ = _reference(scenario)
    outcome = matrix.run_case(matrix.Case(scenario, "concurrent"), old, new)
    _check(outcome)
    if scenario in ("deploy", "update", "destroy"):  # one waits for nothing: it is refused
        assert "LeaseHeld: deployment 'docqa' is locked by " in outcome.message


@pytest.mark.slow
def test_fault_matrix_judges_a_run_that_undoes_nothing_as_broken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge is not lenient: with rollback switched off, a failed update is caught."""
    import lmikit.deploy._deployment as deployment

    monkeypatch.setattr(deployment, "roll_back", lambda run: ([], []))
    old, new, _ = _reference("update")
    case = matrix.Case("update", "failed",
                       _target("update", "UpdateInferenceComponent", "docqa-base"))
    outcome = matrix.run_case(case, old, new)
    assert not outcome.survived and (outcome.final == "neither" or outcome.orphans)
