"""Pure renderers: each is a function of (spec, plan) with no AWS call, clock or randomness.

SageMaker requests, the container environment and ``serving.properties``, the LMCache file,
the model artifact, HyperPod manifests, CloudWatch dashboards and alarms, Grafana, IAM and
copy-count scaling. The root re-exports :func:`render_requests`, :func:`lmi_environment`,
:func:`lmcache_config` and :func:`render_lmcache_yaml`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "AlarmDef": "lmikit.render._alarms",
    "DEFAULT_VLLM_IMAGE": "lmikit.render._hyperpod_vllm",
    "LMCACHE_FILE_NAME": "lmikit.render._lmcache",
    "ResourceNames": "lmikit.render._sagemaker",
    "SAGEMAKER_PRINCIPAL": "lmikit.render._iam",
    "SCALABLE_DIMENSION": "lmikit.render._scaling",
    "SERVICE_NAMESPACE": "lmikit.render._scaling",
    "SERVING_PROPERTIES": "lmikit.render._env",
    "SageMakerRequests": "lmikit.render._sagemaker",
    "ScalingRequests": "lmikit.render._scaling",
    "TRUST_POLICY": "lmikit.render._iam",
    "WILDCARD_REASONS": "lmikit.render._iam",
    "alarm_definitions": "lmikit.render._alarms",
    "alarm_prefix": "lmikit.render._alarms",
    "capacity_warning": "lmikit.render._sagemaker",
    "container_environment": "lmikit.render._env",
    "copy_bounds": "lmikit.render._scaling",
    "dashboard_body": "lmikit.render._cloudwatch",
    "dashboard_name": "lmikit.render._cloudwatch",
    "ecr_repository_arn": "lmikit.render._iam",
    "execution_policy_document": "lmikit.render._iam",
    "grafana_dashboard": "lmikit.render._grafana",
    "hyperpod_manifest": "lmikit.render._hyperpod",
    "hyperpod_notes": "lmikit.render._hyperpod",
    "lmcache_config": "lmikit.render._lmcache",
    "lmi_environment": "lmikit.render._env",
    "model_artifact": "lmikit.render._model_artifact",
    "model_artifact_files": "lmikit.render._model_artifact",
    "model_environment": "lmikit.render._env",
    "no_capacity_alarm": "lmikit.render._scaling",
    "parse_properties": "lmikit.render._model_artifact",
    "partition_of": "lmikit.render._iam",
    "plan_contract": "lmikit.render._env",
    "policy_description": "lmikit.render._iam",
    "put_dashboard_kwargs": "lmikit.render._cloudwatch",
    "put_metric_alarm_requests": "lmikit.render._alarms",
    "read_artifact_files": "lmikit.render._model_artifact",
    "render_grafana_json": "lmikit.render._grafana",
    "render_lmcache_yaml": "lmikit.render._lmcache",
    "render_requests": "lmikit.render._sagemaker",
    "render_scaling": "lmikit.render._scaling",
    "resource_id": "lmikit.render._scaling",
    "role_description": "lmikit.render._iam",
    "role_tags": "lmikit.render._iam",
    "routing_config": "lmikit.render._sagemaker",
    "service_linked_role_arn": "lmikit.render._scaling",
    "serving_properties": "lmikit.render._env",
    "stock_image_note": "lmikit.render._sagemaker",
    "stock_image_secret_problems": "lmikit.render._sagemaker",
    "target_key": "lmikit.render._scaling",
    "volume_kms_key": "lmikit.render._sagemaker",
    "wildcard_reason": "lmikit.render._iam",
}

__all__ = [
    "AlarmDef",
    "DEFAULT_VLLM_IMAGE",
    "LMCACHE_FILE_NAME",
    "ResourceNames",
    "SAGEMAKER_PRINCIPAL",
    "SCALABLE_DIMENSION",
    "SERVICE_NAMESPACE",
    "SERVING_PROPERTIES",
    "SageMakerRequests",
    "ScalingRequests",
    "TRUST_POLICY",
    "WILDCARD_REASONS",
    "alarm_definitions",
    "alarm_prefix",
    "capacity_warning",
    "container_environment",
    "copy_bounds",
    "dashboard_body",
    "dashboard_name",
    "ecr_repository_arn",
    "execution_policy_document",
    "grafana_dashboard",
    "hyperpod_manifest",
    "hyperpod_notes",
    "lmcache_config",
    "lmi_environment",
    "model_artifact",
    "model_artifact_files",
    "model_environment",
    "no_capacity_alarm",
    "parse_properties",
    "partition_of",
    "plan_contract",
    "policy_description",
    "put_dashboard_kwargs",
    "put_metric_alarm_requests",
    "read_artifact_files",
    "render_grafana_json",
    "render_lmcache_yaml",
    "render_requests",
    "render_scaling",
    "resource_id",
    "role_description",
    "role_tags",
    "routing_config",
    "service_linked_role_arn",
    "serving_properties",
    "stock_image_note",
    "stock_image_secret_problems",
    "target_key",
    "volume_kms_key",
    "wildcard_reason",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.render._alarms import (
        AlarmDef,
        alarm_definitions,
        alarm_prefix,
        put_metric_alarm_requests,
    )
    from lmikit.render._cloudwatch import dashboard_body, dashboard_name, put_dashboard_kwargs
    from lmikit.render._env import (
        SERVING_PROPERTIES,
        container_environment,
        lmi_environment,
        model_environment,
        plan_contract,
        serving_properties,
    )
    from lmikit.render._grafana import grafana_dashboard, render_grafana_json
    from lmikit.render._hyperpod import hyperpod_manifest, hyperpod_notes
    from lmikit.render._hyperpod_vllm import DEFAULT_VLLM_IMAGE
    from lmikit.render._iam import (
        SAGEMAKER_PRINCIPAL,
        TRUST_POLICY,
        WILDCARD_REASONS,
        ecr_repository_arn,
        execution_policy_document,
        partition_of,
        policy_description,
        role_description,
        role_tags,
        wildcard_reason,
    )
    from lmikit.render._lmcache import LMCACHE_FILE_NAME, lmcache_config, render_lmcache_yaml
    from lmikit.render._model_artifact import (
        model_artifact,
        model_artifact_files,
        parse_properties,
        read_artifact_files,
    )
    from lmikit.render._sagemaker import (
        ResourceNames,
        SageMakerRequests,
        capacity_warning,
        render_requests,
        routing_config,
        stock_image_note,
        stock_image_secret_problems,
        volume_kms_key,
    )
    from lmikit.render._scaling import (
        SCALABLE_DIMENSION,
        SERVICE_NAMESPACE,
        ScalingRequests,
        copy_bounds,
        no_capacity_alarm,
        render_scaling,
        resource_id,
        service_linked_role_arn,
        target_key,
    )
