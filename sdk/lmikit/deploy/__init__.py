"""Deploy a spec to SageMaker with boto3: create or update idempotently, roll back on failure.

>>> from lmikit.deploy import Deployment  # doctest: +SKIP
>>> result = Deployment(spec, role_arn=role, bucket=bucket).deploy()  # doctest: +SKIP
>>> result.summary()  # doctest: +SKIP
'No changes: every resource already matches the spec.'
"""

from lmikit.deploy._artifacts import StoredArtifact, default_bucket, upload_artifact
from lmikit.deploy._aws import Clients, ProgressEvent, RealClock, Waiter
from lmikit.deploy._deployment import Change, Deployment, DeployResult, ResourceState
from lmikit.deploy._role import (
    RoleResult,
    apply_execution_role,
    ensure_execution_role,
    execution_role_policy,
    remove_execution_role,
)

__all__ = [
    "Change",
    "Clients",
    "DeployResult",
    "Deployment",
    "ProgressEvent",
    "RealClock",
    "ResourceState",
    "RoleResult",
    "StoredArtifact",
    "Waiter",
    "apply_execution_role",
    "default_bucket",
    "ensure_execution_role",
    "execution_role_policy",
    "remove_execution_role",
    "upload_artifact",
]
