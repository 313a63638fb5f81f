"""What a deploy step did to one resource: the record every ``apply_*`` / ``remove_*`` step
returns, for progress lines and the run's summary.

The fields are those of the deployer's own records (kind, name, action, detail), so a
deployer can list these next to its SageMaker changes.

>>> c = Change("scaling-policy", "docqa-base-target-tracking", "create")
>>> c.line(), c.changed
('create scaling-policy docqa-base-target-tracking', True)
>>> Change("alarm", "x", "kept", "not tagged lmikit:deployment=docqa").line()
'kept alarm x (not tagged lmikit:deployment=docqa)'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNCHANGED_ACTIONS = frozenset({"unchanged", "absent", "exists", "kept", "unknown"})


@dataclass(frozen=True)
class Change:
    """``action``: ``create`` | ``update`` | ``replace`` | ``delete`` | ``upload`` change
    something; ``unchanged`` (already as rendered), ``absent`` (nothing to delete),
    ``exists``, ``unknown`` (could not be checked; ``detail`` says why) and ``kept`` (left
    alone because it is not lmikit's, something not lmikit's still uses it, or it is an
    adapter the spec does not manage; ``detail`` says which) do not."""

    kind: str
    name: str
    action: str
    detail: str = ""

    @property
    def changed(self) -> bool:
        return self.action not in UNCHANGED_ACTIONS

    def line(self) -> str:
        text = f"{self.action} {self.kind} {self.name}"
        return f"{text} ({self.detail})" if self.detail else text


REASONED_ACTIONS = ("kept", "unknown")
"""Actions that change nothing but are shown, with their reason, in a summary."""


def summary_lines(changes: Iterable[Change], *, details: bool = True) -> list[str]:
    """One line per change (with its detail unless ``details`` is false; kept and unknown
    ones always say why); nothing for what did not change.

    >>> summary_lines([Change("alarm", "a", "create", "5xx"),
    ...                Change("role", "r", "kept", "not ours"), Change("alarm", "b", "unchanged")],
    ...               details=False)
    ['create alarm a', 'kept role r (not ours)']
    """
    return [c.line() if details or c.action in REASONED_ACTIONS
            else f"{c.action} {c.kind} {c.name}"
            for c in changes if c.changed or c.action in REASONED_ACTIONS]


def summary(changes: Iterable[Change], *, details: bool = True) -> str:
    """:func:`summary_lines` as text, one line each, or that nothing changed.

    >>> summary([Change("alarm", "a", "unchanged")])
    'No changes.'
    >>> print(summary([Change("alarm", "a", "create"), Change("role", "r", "kept", "not ours")]))
    create alarm a
    kept role r (not ours)
    """
    return "\n".join(summary_lines(changes, details=details)) or "No changes."
