"""What a run did (or would do) to each resource, and the deployment's current state."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmikit.change import Change

__all__ = ["Change", "DeployResult", "ResourceState"]

@dataclass
class DeployResult:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    def summary(self) -> str:
        if not self.changed:
            text = "No changes: every resource already matches the spec."
        else:
            shown = ("kept", "unknown")  # with their reason
            text = "; ".join(c.line() if c.action in shown else f"{c.action} {c.kind} {c.name}"
                             for c in self.changes if c.changed or c.action in shown)
        return "\n".join([text, *self.notes])


@dataclass(frozen=True)
class ResourceState:
    kind: str
    name: str
    status: str
    detail: str = ""
