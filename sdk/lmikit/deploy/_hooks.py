"""Extra steps a deploy runs after its resources are in service, and a destroy runs before
it deletes anything (autoscaling, dashboards, alarms, ...).

A step (a :data:`Hook`) is a callable taking a :class:`StepContext`. It returns the changes
it made (shown in the summary) and may register how to undo them with ``ctx.on_rollback``: a
post-deploy step that fails rolls the whole run back, its own undo included. Steps must be
idempotent (a deploy that is run again runs them again).

>>> def dashboard(ctx: StepContext) -> list[Change]:
...     # put_dashboard(...) with ctx.clients.cloudwatch, then:
...     ctx.on_rollback("dashboard docqa", lambda: None)  # delete_dashboards(...)
...     return [Change("dashboard", "docqa", "create")]
>>> ctx = StepContext(spec=None, plan=None, clients=None, bucket="b",  # type: ignore[arg-type]
...                   progress=print)
>>> dashboard(ctx), [what for what, _ in ctx.undo]
([Change(kind='dashboard', name='docqa', action='create', detail='')], ['dashboard docqa'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lmikit.deploy._result import Change

if TYPE_CHECKING:
    from lmikit.aws import Clients, ProgressFn
    from lmikit.spec import DeploymentSpec


@dataclass
class StepContext:
    """What a hook step may use: the spec, its plan, boto3 clients for the spec's region,
    the bucket, a progress callback, and ``on_rollback`` to register an undo."""

    spec: DeploymentSpec
    plan: Any
    clients: Clients
    bucket: str
    progress: ProgressFn
    undo: list[tuple[str, Callable[[], None]]] = field(default_factory=list)

    def on_rollback(self, description: str, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the deploy fails after this step (newest first)."""
        self.undo.append((description, undo))


Hook = Callable[[StepContext], Iterable[Change] | None]
