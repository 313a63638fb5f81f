"""Garbage collection: delete the deployment's endpoint configs, Models and S3 artifacts
that nothing live uses.

Only what is ours is considered (configs and Models by their ``lmikit:deployment`` tag,
objects under ``lmikit/<name>/`` whose metadata names the deployment), and only while
nothing is mid-change: during an update both the old and the new config (or artifact) are
in use, so collection waits for a settled deployment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lmikit.aws import (
    ArtifactStore,
    artifact_of,
    components_of,
    delete,
    describe,
    owned_names,
    status_of,
)
from lmikit.aws._resources import TRANSITIONAL
from lmikit.deploy._interrupt import StopRequested
from lmikit.deploy._plan import Step
from lmikit.deploy._result import Change
from lmikit.deploy._run import Run
from lmikit.errors import AwsError, LmikitError


@dataclass
class Usage:
    """What live resources use: endpoint configs, Models and artifact URLs."""

    configs: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    urls: set[str] = field(default_factory=set)
    busy: list[str] = field(default_factory=list)  # resources mid-change


def usage(sm: Any, endpoint_name: str) -> Usage:
    used = Usage()
    ep = describe(sm, "endpoint", endpoint_name)
    if ep is None:
        return used
    used.configs.add(ep.get("EndpointConfigName", ""))
    pending = (ep.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    if pending:
        used.configs.add(pending)
    if status_of("endpoint", ep) in TRANSITIONAL:
        used.busy.append(f"endpoint {endpoint_name} is {status_of('endpoint', ep)}")
    for comp in components_of(sm, endpoint_name):
        status = status_of("inference-component", comp)
        if status in TRANSITIONAL:
            used.busy.append(f"inference-component {comp['InferenceComponentName']} is {status}")
        model = comp.get("Specification", {}).get("ModelName")
        if model:
            used.models.add(model)
        url = artifact_of(comp)
        if url:
            used.urls.add(url)
    return used


def garbage(run: Run, store: ArtifactStore, name: str, used: Usage | None = None
            ) -> list[Change]:
    """What collection of deployment ``name`` would delete (read calls only)."""
    sm = run.sm
    used = used or usage(sm, name)
    if used.busy:
        return []
    out = [Change("endpoint-config", c, "delete", "no longer used")
           for c in owned_names(sm, "endpoint-config", name) if c not in used.configs]
    out += [Change("model", m, "delete", "no longer used")
            for m in owned_names(sm, "model", name) if m not in used.models]
    for key in store.keys():
        url = f"s3://{store.bucket}/{key}"
        if url not in used.urls and store.is_ours(key):
            out.append(Change("artifact", url, "delete", "no longer used"))
    return out


@dataclass
class Collection:
    """What one garbage collection deleted, and what it left with why (names first)."""

    deleted: list[Change] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # "endpoint-config x (why)"
    stopped: str = ""  # why it stopped before trying the rest; "" when it tried every one
    busy: list[str] = field(default_factory=list)  # mid-change: collection did not start

    def left_line(self) -> str:
        """``3 unused resource(s): endpoint-config x (why), ...``, or ""."""
        if not self.left:
            return ""
        return f"{len(self.left)} unused resource(s): {', '.join(self.left)}"


def collect(run: Run, store: ArtifactStore, name: str, spec_path: str, *,
            finish_after_first_press: bool = False,
            replaced: list[str] | None = None) -> Collection:
    """Delete what :func:`garbage` finds; skipped (with a note naming ``replaced``, what the
    run just replaced) while anything is mid-change. A delete that fails is left, with its
    error, and the others are still deleted. After a deploy it finishes despite a first
    Ctrl-C (it only deletes what nothing uses, with quick calls); a second one stops it,
    and what it did not try is left."""
    used = usage(run.sm, name)
    if used.busy:
        what = f"; it leaves {', '.join(replaced)} for now" if replaced else ""
        run.result.notes.append("Garbage collection skipped while " + ", ".join(used.busy)
                                + f"{what}; run `lmikit gc {spec_path}` later.")
        return Collection(left=list(replaced or ()), busy=used.busy)
    planned = garbage(run, store, name, used)
    out = Collection()
    for i, change in enumerate(planned):
        gone = False
        try:
            if finish_after_first_press and not run.interrupts.abandon:
                run.keep_alive()
            else:
                run.checkpoint()
            try:
                if change.kind == "artifact":
                    store.delete_key(change.name.split("/", 3)[3])
                else:
                    delete(run.sm, change.kind, change.name)
            except AwsError as exc:  # this one stays; the others may still go
                out.left.append(f"{change.kind} {change.name} ({exc})")
                run.note(change.kind, change.name, "delete", "Failed", str(exc))
                continue
            gone = True
            out.deleted.append(change)
            run.note(change.kind, change.name, "delete", "deleted", change.detail)
        except (LmikitError, StopRequested, KeyboardInterrupt) as exc:
            if isinstance(exc, KeyboardInterrupt) and not run.interrupts.handler_installed:
                run.interrupts.press()
            out.stopped = str(exc) or "Ctrl-C"
            out.left += [f"{c.kind} {c.name} (not tried)" for c in planned[i + gone:]]
            break
    return out


def replaced_by(steps: list[Step]) -> list[str]:
    """The endpoint config, Models and artifacts a deploy's ``steps`` stop using: what its
    garbage collection deletes (named without a call, for when it cannot run)."""
    out: list[str] = []
    for step in steps:
        if step.action not in ("update", "replace", "delete"):
            continue
        old, new = step.old or {}, step.body or {}
        if step.kind == "endpoint" and old.get("EndpointConfigName") not in (
                None, new.get("EndpointConfigName")):
            out.append(f"endpoint-config {old['EndpointConfigName']}")
        if step.kind != "inference-component":
            continue
        model = old.get("Specification", {}).get("ModelName")
        if model and model != new.get("Specification", {}).get("ModelName"):
            out.append(f"model {model}")
        url = artifact_of(old)
        if url and url != artifact_of(new):
            out.append(f"artifact {url}")
    return list(dict.fromkeys(out))
