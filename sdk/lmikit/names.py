"""Names and tags every lmikit target agrees on, defined once.

The renderers (SageMaker requests, environment, dashboards, alarms, HyperPod), the deployer,
the adapter registry and the runtime client all name resources through these functions, so
a deployment called ``docqa`` is always the endpoint ``docqa``, the base component
``docqa-base`` and the adapter components ``docqa-<adapter>``, each tagged
``lmikit:deployment=docqa``.

The SageMaker endpoint the HyperPod inference operator creates for the same spec is
``docqa-hyperpod``, tagged ``lmikit:hyperpod-deployment=docqa``: lmikit's SageMaker
deployment decides what it owns by ``lmikit:deployment`` alone, so it never adopts, updates
or deletes what the operator manages.

Each adapter component also says who manages it, in ``lmikit:managed-by``: ``spec`` (listed
in the spec: ``lmikit deploy`` and the CDK stack create, update and remove it) or ``adapters``
(registered with ``lmikit adapters`` / :class:`lmikit.adapters.AdapterRegistry`: a deploy
keeps it). :func:`adapter_manager` reads it, with a default for components made before it.

>>> hyperpod_endpoint_name("DocQA")
'docqa-hyperpod'
>>> base_component_name("docqa"), adapter_component_name("docqa", "legal")
('docqa-base', 'docqa-legal')
>>> deployment_tags("docqa", {"team": "search"})
[{'Key': 'lmikit:deployment', 'Value': 'docqa'}, {'Key': 'team', 'Value': 'search'}]
"""

from __future__ import annotations

from collections.abc import Mapping

VARIANT_NAME = "AllTraffic"
DEPLOYMENT_TAG = "lmikit:deployment"
# On the SageMaker endpoint the HyperPod operator creates from a manifest (spec.tags of the
# InferenceEndpointConfig): the deployment it was rendered from, under a key lmikit's SageMaker
# ownership check (lmikit.aws.owner_of) never reads.
HYPERPOD_DEPLOYMENT_TAG = "lmikit:hyperpod-deployment"
HYPERPOD_ENDPOINT_SUFFIX = "-hyperpod"
ADAPTER_TAG = "lmikit:adapter"
# On every adapter component: who manages it (the values below). The key and both values fit
# botocore's sagemaker TagKey / TagValue (pattern [\p{L}\p{Z}\p{N}_.:/=+\-@]*, 128 / 256).
MANAGED_BY_TAG = "lmikit:managed-by"
MANAGED_BY_SPEC = "spec"  # listed in the spec: lmikit deploy / the CDK stack own it
MANAGED_BY_ADAPTERS = "adapters"  # registered with `lmikit adapters`: deploy keeps it
# On the endpoint: the S3 bucket holding the deployment's artifacts (and its lease), so the
# adapter commands and destroy find them without being told.
BUCKET_TAG = "lmikit:bucket"
BASE_SUFFIX = "-base"
# The spec's model.id, recorded in the base component's (or its Model's) environment for the
# adapter registry and the OpenAI-compatible client (LMI itself reads option.model_id).
MODEL_ID_ENV = "LMIKIT_MODEL_ID"


def base_component_name(deployment: str) -> str:
    """The base inference component of a deployment (the endpoint's name + ``-base``)."""
    return f"{deployment}{BASE_SUFFIX}"


def adapter_component_name(deployment: str, adapter: str) -> str:
    """The adapter inference component ``<deployment>-<adapter>``."""
    return f"{deployment}-{adapter}"


def deployment_prefix(deployment: str) -> str:
    """The deployment's own S3 key prefix, with its slash (``docqa-v2`` is not under it).

    >>> deployment_prefix("docqa")
    'lmikit/docqa/'
    """
    return f"lmikit/{deployment}/"


def deployment_tags(deployment: str, extra: Mapping[str, str] | None = None
                    ) -> list[dict[str, str]]:
    """SageMaker/IAM tag list: the deployment tag plus ``extra``, sorted by key."""
    merged = {DEPLOYMENT_TAG: deployment, **(extra or {})}
    return [{"Key": k, "Value": v} for k, v in sorted(merged.items())]


def adapter_manager(tags: Mapping[str, str], *, listed: bool) -> str:
    """Who manages an adapter component with ``tags``: ``spec`` or ``adapters``.

    The ``lmikit:managed-by`` tag says so. A component without it was made before lmikit
    recorded managers: one the spec lists is the spec's (deploy already managed it); of the
    others, one tagged ``lmikit:adapter`` was registered with ``lmikit adapters`` (only the
    registry ever set that tag), and one without was deployed from an earlier spec.

    >>> adapter_manager({"lmikit:managed-by": "adapters"}, listed=True)
    'adapters'
    >>> adapter_manager({"lmikit:adapter": "support"}, listed=False)
    'adapters'
    >>> adapter_manager({"lmikit:adapter": "support"}, listed=True)
    'spec'
    >>> adapter_manager({}, listed=False)
    'spec'
    """
    recorded = tags.get(MANAGED_BY_TAG, "")
    if recorded in (MANAGED_BY_SPEC, MANAGED_BY_ADAPTERS):
        return recorded
    if listed or ADAPTER_TAG not in tags:
        return MANAGED_BY_SPEC
    return MANAGED_BY_ADAPTERS


def hyperpod_endpoint_name(deployment: str) -> str:
    """The SageMaker endpoint the HyperPod operator creates (``spec.endpointName``).

    Lowercase, as Kubernetes names are, plus ``-hyperpod``, so it is never the name of the
    deployment's own SageMaker endpoint, which is the deployment name itself (SageMaker
    endpoint names are unique per account and region regardless of case: botocore's
    CreateEndpoint documentation). A deployment name is at most 40 characters of
    ``[a-zA-Z0-9-]`` (:data:`lmikit.spec.NAME_MAX`), so the result, at most 49, fits the
    63 characters and the pattern of both SageMaker's ``EndpointName`` and the CRD's
    ``endpointName``.
    """
    return f"{deployment.lower()}{HYPERPOD_ENDPOINT_SUFFIX}"


def target_tracking_policy_name(deployment: str) -> str:
    """The copy-count target-tracking policy of the base component."""
    return f"{base_component_name(deployment)}-target-tracking"


def scale_from_zero_name(deployment: str) -> str:
    """The step-scaling policy and the alarm that wake a base component scaled to zero.

    >>> scale_from_zero_name("docqa")
    'docqa-base-scale-from-zero'
    """
    return f"{base_component_name(deployment)}-scale-from-zero"


def execution_role_name(deployment: str) -> str:
    """The IAM execution role ``lmikit deploy --create-role`` creates (and its managed
    policy's name): at most 57 characters for a 40-character deployment name (IAM: 64)."""
    return f"lmikit-{deployment}-execution"


def artifact_prefix(deployment: str, adapter: str | None = None) -> str:
    """S3 key prefix of the deployment's model artifact, or of one adapter's artifact.

    >>> artifact_prefix("docqa"), artifact_prefix("docqa", "legal")
    ('lmikit/docqa/model', 'lmikit/docqa/adapters/legal')
    """
    return f"{adapters_prefix(deployment)}{adapter}" if adapter else \
        f"{deployment_prefix(deployment)}model"


def adapters_prefix(deployment: str) -> str:
    """The S3 key prefix, with its slash, under which every adapter artifact of the
    deployment lies (the spec's, and those registered with ``lmikit adapters``).

    >>> adapters_prefix("docqa")
    'lmikit/docqa/adapters/'
    """
    return f"{deployment_prefix(deployment)}adapters/"


def default_bucket_name(region: str, account: str) -> str:
    """SageMaker's default bucket, ``sagemaker-<region>-<account>``: where lmikit keeps
    artifacts when no bucket is given or recorded in the endpoint's ``lmikit:bucket`` tag.

    >>> default_bucket_name("us-east-1", "123456789012")
    'sagemaker-us-east-1-123456789012'
    """
    return f"sagemaker-{region}-{account}"
