"""What a run did (or would do) to each resource, and the deployment's current state."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmikit.deploy._change import Change, summary_lines

__all__ = ["Change", "DeployResult", "ResourceState"]


@dataclass
class DeployResult:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    def summary(self) -> str:
        """What changed, one resource a line (then the notes), or that nothing did."""
        text = "No changes: every resource already matches the spec."
        if self.changed:
            lines = summary_lines(self.changes, details=False)
            text = "\n".join([f"Done ({len(lines)}):", *(f"  {line}" for line in lines)])
        return "\n".join([text, *self.notes])


@dataclass(frozen=True)
class ResourceState:
    kind: str
    name: str
    status: str
    detail: str = ""
