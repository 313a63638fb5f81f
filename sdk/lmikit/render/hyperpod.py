"""HyperPod inference operator manifest (InferenceEndpointConfig, v1) from the same spec.

The operator manages LMCache itself: L1 is CPU offload on each node, L2 is cluster-wide
(HyperPod tiered storage, or Redis). It strips user ``LMCACHE_*`` variables and injects its own,
so the manifest carries the tier choice, not an LMCache file.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.plan import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "DocQA",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}, "routing": {"strategy": "prefix_aware"}})
>>> m = hyperpod_manifest(spec, plan_spec(spec), image_uri="img:1")
>>> m["metadata"]["name"], m["spec"]["intelligentRoutingSpec"]["routingStrategy"]
('docqa', 'prefixaware')
"""

from __future__ import annotations

import math
import re
from typing import Any

from lmikit.errors import RenderError
from lmikit.names import DEPLOYMENT_TAG
from lmikit.plan import Plan
from lmikit.render.env import lmi_environment
from lmikit.spec import DeploymentSpec

API_VERSION = "inference.sagemaker.aws.amazon.com/v1"
KIND = "InferenceEndpointConfig"
MODEL_PORT = 8080
MODEL_MOUNT = "/opt/ml/model"
ROUTING = {"prefix_aware": "prefixaware", "kv_aware": "kvaware", "sticky_session": "session"}
LOAD_BALANCER = {"least_outstanding": "least_outstanding_requests", "random": "round_robin"}
# The operator owns these: it configures LMCache and the KV connector from kvCacheSpec, and
# --enable-prefix-caching must not be passed alongside its KV cache. LMIKIT_EMF is left out
# too: its dimensions name a SageMaker inference component that does not exist on HyperPod,
# pod logs reach CloudWatch only through whatever log agent the cluster runs, and the
# operator publishes its own metrics (metrics.modelMetrics scrapes the same path).
OPERATOR_OWNED = ("OPTION_KV_TRANSFER_CONFIG", "OPTION_LMCACHE_CONFIG_FILE",
                  "OPTION_ENABLE_PREFIX_CACHING", "LMIKIT_PLAN", "LMIKIT_EMF")


def rfc1123(name: str) -> str:
    """Lowercase RFC 1123 label, as the operator requires for endpoint and object names."""
    label = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")[:63].rstrip("-")
    if not label:
        raise RenderError(f"name {name!r} has no characters usable in a Kubernetes name")
    return label


def kv_cache_spec(spec: DeploymentSpec, plan: Plan) -> dict[str, Any]:
    if plan.tier == "none":
        return {"enableL1Cache": False, "enableL2Cache": False}
    out: dict[str, Any] = {"enableL1Cache": True, "enableL2Cache": False}
    if spec.kv_cache.in_memory_only or plan.tier == "cpu":
        return out
    url = spec.kv_cache.remote_url
    if plan.tier == "remote" and url and url.startswith(("redis://", "rediss://")):
        out["enableL2Cache"] = True
        out["l2CacheSpec"] = {"l2CacheBackend": "redis", "l2CacheLocalUrl": url}
    elif plan.tier == "remote":
        raise RenderError(f"kv_cache.remote_url {url!r}: HyperPod's L2 cache supports redis:// "
                          "URLs or its managed tiered storage (use mode 'cpu+disk')")
    else:  # cpu+disk: the cluster-wide managed tier plays the disk tier's part
        out["enableL2Cache"] = True
        out["l2CacheSpec"] = {"l2CacheBackend": "tieredstorage"}
    return out


def model_source(spec: DeploymentSpec) -> dict[str, Any]:
    if spec.model.is_s3:
        bucket, _, prefix = spec.model.id[len("s3://"):].partition("/")
        return {"modelSourceType": "s3", "s3Storage": {"bucketName": bucket,
                                                      "region": spec.region},
                "modelLocation": prefix.rstrip("/")}
    hf: dict[str, Any] = {"modelId": spec.model.id}
    rev = spec.model.revision
    if rev and re.fullmatch(r"[0-9a-f]{40}", rev):
        hf["commitSHA"] = rev
    if spec.security.hf_token_secret_arn:
        # The token reaches the cluster as a Kubernetes Secret synced from Secrets Manager
        # (e.g. by the Secrets Store CSI driver); the manifest names it, never holds it.
        hf["tokenSecretRef"] = {"name": f"{rfc1123(spec.name)}-hf-token", "key": "token"}
    return {"modelSourceType": "huggingface", "huggingFaceModel": hf}


def hyperpod_manifest(spec: DeploymentSpec, plan: Plan, *, image_uri: str,
                      namespace: str = "default") -> dict[str, Any]:
    """The InferenceEndpointConfig for ``kubectl apply``."""
    name = rfc1123(spec.name)
    full = lmi_environment(spec, plan)
    env = {k: v for k, v in full.items()
           if k not in OPERATOR_OWNED and not k.startswith("LMCACHE_")}
    if not plan.uses_lmcache:
        env["OPTION_ENABLE_PREFIX_CACHING"] = full["OPTION_ENABLE_PREFIX_CACHING"]
    memory_gib = math.ceil(plan.min_memory_mb / 1024)
    gpus = str(plan.tp)
    body: dict[str, Any] = {
        "modelName": name,
        "endpointName": name,
        "instanceType": spec.instance.type,
        "replicas": spec.instance.copies_per_instance * max(1, spec.instance.min_count),
        "modelSourceConfig": model_source(spec),
        "worker": {
            "image": image_uri,
            "modelInvocationPort": {"containerPort": MODEL_PORT, "name": "http"},
            "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT},
            "resources": {
                "requests": {"nvidia.com/gpu": gpus, "cpu": str(int(plan.cpu_cores)),
                             "memory": f"{memory_gib}Gi"},
                "limits": {"nvidia.com/gpu": gpus},
            },
            "environmentVariables": [{"name": k, "value": v} for k, v in env.items()],
        },
        "kvCacheSpec": kv_cache_spec(spec, plan),
        "metrics": {"enabled": spec.observability.detailed_metrics,
                    "modelMetrics": {"path": spec.observability.metrics_path,
                                     "port": MODEL_PORT}},
        "tags": [{"name": k, "value": v} for k, v in sorted(
            {DEPLOYMENT_TAG: spec.name, **spec.tags}.items())],
    }
    strategy = spec.routing.strategy
    if strategy in ROUTING:
        body["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": ROUTING[strategy]}
    else:
        body["loadBalancer"] = {"routingAlgorithm": LOAD_BALANCER[strategy]}
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "lmikit"}},
            "spec": body}


def hyperpod_notes(spec: DeploymentSpec) -> list[str]:
    """Operator behaviour a person should know before applying the manifest."""
    notes = ["intelligentRoutingSpec.enabled cannot be changed once set, and cannot be added to "
             "an existing deployment: decide routing before the first apply"]
    if spec.routing.strategy == "kv_aware":
        notes.append("kvaware routing matches /v1/completions prompts, not chat messages")
    if spec.security.hf_token_secret_arn:
        notes.append(f"create the Kubernetes Secret {rfc1123(spec.name)}-hf-token (key 'token') "
                     "from the Secrets Manager secret before applying")
    return notes
