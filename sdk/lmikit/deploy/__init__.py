"""Deploy a spec to SageMaker with boto3: converge on the spec, and undo a failed run.

>>> from lmikit.deploy import Deployment  # doctest: +SKIP
>>> d = Deployment(spec, role_arn=role, bucket=bucket)  # doctest: +SKIP
>>> for change in d.plan_changes(): print(change.line())  # doctest: +SKIP
>>> d.deploy().summary()  # doctest: +SKIP
'No changes: every resource already matches the spec.'

Extension points: ``Deployment.post_deploy_steps`` and ``Deployment.pre_destroy_steps`` take
callables of a :class:`StepContext` (see :mod:`lmikit.deploy._hooks`).
"""

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
from lmikit.deploy._deployment import Deployment
from lmikit.deploy._hooks import Hook, StepContext
from lmikit.deploy._interrupt import Interrupts
from lmikit.deploy._result import Change, DeployResult, ResourceState
from lmikit.deploy._role import (
    RoleResult,
    apply_execution_role,
    ensure_execution_role,
    execution_role_policy,
    remove_execution_role,
)

__all__ = [
    "ArtifactStore",
    "Change",
    "Clients",
    "DeployResult",
    "Deployment",
    "Hook",
    "Interrupts",
    "Lease",
    "ProgressEvent",
    "RealClock",
    "ResourceState",
    "RoleResult",
    "StepContext",
    "StoredArtifact",
    "Waiter",
    "apply_execution_role",
    "default_bucket",
    "ensure_execution_role",
    "execution_role_policy",
    "remove_execution_role",
    "upload_artifact",
]
