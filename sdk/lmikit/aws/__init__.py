"""lmikit's AWS edge, shared by :mod:`lmikit.deploy` and :mod:`lmikit.adapters`.

One client factory with one retry policy (:class:`Clients`), one error mapper that turns
every botocore error into :class:`lmikit.errors.AwsError` (:func:`call`, :func:`paginate`),
one clock (:class:`Clock`, :class:`RealClock`), waits with progress (:class:`Waiter`),
ownership by tag (:func:`owner_of`), the deployment lease (:class:`Lease`) and the
content-addressed artifact store (:class:`ArtifactStore`). boto3 is imported only when a
client is made.
"""

from lmikit.aws._clients import Clients, Clock, RealClock
from lmikit.aws._errors import (
    call,
    describe_or_none,
    is_already_existing,
    is_not_found,
    is_timeout,
    map_error,
    paginate,
    read_errors,
    read_failure,
)
from lmikit.aws._lease import Lease, LeaseInfo, lease_key
from lmikit.aws._resources import (
    KINDS,
    artifact_of,
    base_of,
    component_environment,
    component_image,
    components_of,
    create,
    delete,
    describe,
    not_ours_message,
    owned_names,
    owner_of,
    status_of,
    tag_dict,
    tags_of,
)
from lmikit.aws._store import (
    ArtifactSource,
    ArtifactStore,
    BytesSource,
    StoredArtifact,
    artifact_key,
    as_source,
    check_bucket_name,
    default_bucket,
    package_source,
    split_s3_url,
    upload_progress,
)
from lmikit.aws._waiter import ProgressEvent, ProgressFn, Stopped, Waiter, no_progress

__all__ = [
    "KINDS",
    "ArtifactSource",
    "ArtifactStore",
    "BytesSource",
    "Clients",
    "Clock",
    "Lease",
    "LeaseInfo",
    "ProgressEvent",
    "ProgressFn",
    "RealClock",
    "Stopped",
    "StoredArtifact",
    "Waiter",
    "artifact_key",
    "artifact_of",
    "as_source",
    "base_of",
    "call",
    "check_bucket_name",
    "component_environment",
    "component_image",
    "components_of",
    "create",
    "default_bucket",
    "delete",
    "describe",
    "describe_or_none",
    "is_already_existing",
    "is_not_found",
    "is_timeout",
    "lease_key",
    "map_error",
    "no_progress",
    "not_ours_message",
    "owned_names",
    "owner_of",
    "package_source",
    "paginate",
    "read_errors",
    "read_failure",
    "split_s3_url",
    "status_of",
    "tag_dict",
    "tags_of",
    "upload_progress",
]
