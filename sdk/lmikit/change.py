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
    alone because it is not lmikit's, or something not lmikit's still uses it; ``detail``
    says which) do not."""

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


def summary(changes: Iterable[Change]) -> str:
    """One line: what changed, or that nothing did.

    >>> summary([Change("alarm", "a", "unchanged")])
    'No changes.'
    """
    done = [c.line() for c in changes if c.changed or c.action in ("kept", "unknown")]
    return "; ".join(done) if done else "No changes."
