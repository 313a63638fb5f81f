"""What a run did (or would do) to each resource, and the deployment's current state."""

from __future__ import annotations

from dataclasses import dataclass, field

QUIET_ACTIONS = ("unchanged", "absent", "exists")


@dataclass(frozen=True)
class Change:
    """What a run did (or would do) to one resource."""

    kind: str  # "endpoint" | "endpoint-config" | "inference-component" | "model" | ...
    name: str
    action: str  # "create" | "update" | "replace" | "delete" | "upload" | "unchanged" | ...
    detail: str = ""

    def line(self) -> str:
        text = f"{self.action} {self.kind} {self.name}"
        return f"{text} ({self.detail})" if self.detail else text


@dataclass
class DeployResult:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.action not in QUIET_ACTIONS for c in self.changes)

    def summary(self) -> str:
        if not self.changed:
            text = "No changes: every resource already matches the spec."
        else:
            text = "; ".join(f"{c.action} {c.kind} {c.name}" for c in self.changes
                             if c.action not in QUIET_ACTIONS)
        return "\n".join([text, *self.notes])


@dataclass(frozen=True)
class ResourceState:
    kind: str
    name: str
    status: str
    detail: str = ""
