"""What a run did (or would do) to each resource, and the deployment's current state."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmikit.change import Change, summary

__all__ = ["Change", "DeployResult", "ResourceState"]


@dataclass
class DeployResult:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    def summary(self) -> str:
        text = summary(self.changes, details=False) if self.changed else \
            "No changes: every resource already matches the spec."
        return "\n".join([text, *self.notes])


@dataclass(frozen=True)
class ResourceState:
    kind: str
    name: str
    status: str
    detail: str = ""
