"""Deploy a spec to SageMaker with boto3: converge on the spec, and undo a failed run.

>>> from lmikit.deploy import Deployment  # doctest: +SKIP
>>> d = Deployment(spec, role_arn=role, bucket=bucket)  # doctest: +SKIP
>>> for change in d.plan_changes(): print(change.line())  # doctest: +SKIP
>>> d.deploy().summary()  # doctest: +SKIP
'No changes: every resource already matches the spec.'

Extension points: ``Deployment.post_deploy_steps`` and ``Deployment.pre_destroy_steps`` take
callables of a :class:`StepContext` (see :mod:`lmikit.deploy._hooks`). Beside the deployer:
the execution role, autoscaling and observability writes on their own
(:func:`apply_execution_role`, :func:`apply_scaling`, :func:`apply_observability`), and
:func:`doctor`, which reads a live deployment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "ArtifactStore": "lmikit.aws",
    "Change": "lmikit.deploy._change",
    "Check": "lmikit.deploy._doctor",
    "Clients": "lmikit.aws",
    "DeployResult": "lmikit.deploy._result",
    "Deployment": "lmikit.deploy._deployment",
    "Doctor": "lmikit.deploy._doctor",
    "Hook": "lmikit.deploy._hooks",
    "Interrupts": "lmikit.deploy._interrupt",
    "Lease": "lmikit.aws",
    "ProgressEvent": "lmikit.aws",
    "RealClock": "lmikit.aws",
    "Report": "lmikit.deploy._doctor",
    "ResourceState": "lmikit.deploy._result",
    "RoleResult": "lmikit.deploy._role",
    "StepContext": "lmikit.deploy._hooks",
    "StoredArtifact": "lmikit.aws",
    "Waiter": "lmikit.aws",
    "apply_execution_role": "lmikit.deploy._role",
    "apply_observability": "lmikit.deploy._observability",
    "apply_scaling": "lmikit.deploy._scaling",
    "default_bucket": "lmikit.aws",
    "deploy_alarms": "lmikit.deploy._observability",
    "deploy_dashboard": "lmikit.deploy._observability",
    "doctor": "lmikit.deploy._doctor",
    "ensure_execution_role": "lmikit.deploy._role",
    "execution_role_policy": "lmikit.deploy._role",
    "remove_execution_role": "lmikit.deploy._role",
    "remove_observability": "lmikit.deploy._observability",
    "remove_scaling": "lmikit.deploy._scaling",
    "upload_artifact": "lmikit.deploy._aws",
}

__all__ = [
    "ArtifactStore",
    "Change",
    "Check",
    "Clients",
    "DeployResult",
    "Deployment",
    "Doctor",
    "Hook",
    "Interrupts",
    "Lease",
    "ProgressEvent",
    "RealClock",
    "Report",
    "ResourceState",
    "RoleResult",
    "StepContext",
    "StoredArtifact",
    "Waiter",
    "apply_execution_role",
    "apply_observability",
    "apply_scaling",
    "default_bucket",
    "deploy_alarms",
    "deploy_dashboard",
    "doctor",
    "ensure_execution_role",
    "execution_role_policy",
    "remove_execution_role",
    "remove_observability",
    "remove_scaling",
    "upload_artifact",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.aws import (
        ArtifactStore,
        Clients,
        Lease,
        ProgressEvent,
        RealClock,
        StoredArtifact,
        Waiter,
        default_bucket,
    )
    from lmikit.deploy._aws import upload_artifact
    from lmikit.deploy._change import Change
    from lmikit.deploy._deployment import Deployment
    from lmikit.deploy._doctor import Check, Doctor, Report, doctor
    from lmikit.deploy._hooks import Hook, StepContext
    from lmikit.deploy._interrupt import Interrupts
    from lmikit.deploy._observability import (
        apply_observability,
        deploy_alarms,
        deploy_dashboard,
        remove_observability,
    )
    from lmikit.deploy._result import DeployResult, ResourceState
    from lmikit.deploy._role import (
        RoleResult,
        apply_execution_role,
        ensure_execution_role,
        execution_role_policy,
        remove_execution_role,
    )
    from lmikit.deploy._scaling import apply_scaling, remove_scaling
