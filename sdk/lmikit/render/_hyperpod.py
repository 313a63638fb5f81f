"""HyperPod inference operator manifest (InferenceEndpointConfig, v1) from the same spec.

The operator manages LMCache itself: L1 is CPU offload on each node, L2 is cluster-wide
(HyperPod tiered storage, or Redis). It wires ``kvCacheSpec`` and ``intelligentRoutingSpec``
into vLLM-based workers only, so a manifest that uses either runs vLLM's OpenAI server
(:mod:`lmikit.render._hyperpod_vllm`); a manifest with neither runs the LMI container.
The operator strips user ``LMCACHE_*`` variables and injects its own, so the manifest carries
the tier choice, not an LMCache file.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "DocQA",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}, "routing": {"strategy": "prefix_aware"}})
>>> m = hyperpod_manifest(spec, plan_spec(spec), image_uri="img:1")
>>> m["metadata"]["name"], m["spec"]["intelligentRoutingSpec"]["routingStrategy"]
('docqa', 'prefixaware')
>>> m["spec"]["worker"]["modelInvocationPort"]["containerPort"]
8000
"""

from __future__ import annotations

import math
import re
from typing import Any

from lmikit.catalog import VLLM_VERSION, OptionRow
from lmikit.errors import RenderError
from lmikit.names import DEPLOYMENT_TAG, HYPERPOD_DEPLOYMENT_TAG, hyperpod_endpoint_name
from lmikit.planner import MARGIN, Plan, StartupEstimate
from lmikit.render._env import lmi_environment
from lmikit.render._hub_token import gated_problem
from lmikit.render._hyperpod_images import (
    WORKER_IMAGES,
    WorkerChoice,
    choice_note,
    choose_worker_image,
)
from lmikit.render._hyperpod_vllm import (
    VLLM_PORT,
    check_image,
    vllm_spec_fields,
    vllm_worker,
)
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

API_VERSION = "inference.sagemaker.aws.amazon.com/v1"
KIND = "InferenceEndpointConfig"
MODEL_PORT = 8080
MODEL_MOUNT = "/opt/ml/model"
ROUTING = {"prefix_aware": "prefixaware", "kv_aware": "kvaware", "sticky_session": "session"}
LOAD_BALANCER = {"least_outstanding": "least_outstanding_requests", "random": "round_robin"}
# The LMI worker runs the stock LMI image (the CLI passes it). Its Prometheus endpoint is
# djl-serving's GET /server/metrics on the inference port 8080, answered only with
# SERVING_PROMETHEUS=true (djl-serving master: serving/docker/config.properties,
# ManagementRequestHandler.handleRequest, prometheus/MetricExporter.export).
LMI_METRICS_PATH = "/server/metrics"
LMI_PROMETHEUS_ENV = "SERVING_PROMETHEUS"
# The operator owns these: it configures LMCache and the KV connector from kvCacheSpec, and
# --enable-prefix-caching must not be passed alongside its KV cache. LMIKIT_* variables are
# read only by lmikit's own image (sizing, EMF, metrics front, token fetch), not by the stock
# LMI image this worker runs: the operator publishes its own metrics and hands the Hugging Face
# token over as huggingFaceModel.tokenSecretRef.
OPERATOR_OWNED = ("OPTION_KV_TRANSFER_CONFIG", "OPTION_LMCACHE_CONFIG_FILE",
                  "OPTION_ENABLE_PREFIX_CACHING")
LMI_IMAGE_MARK = "djl-inference"
_SHA = re.compile(r"[0-9a-f]{40}")  # the CRD's huggingFaceModel.commitSHA pattern
# spec.maxDeployTimeInSeconds: "Defaults to 1 hour (3600 seconds)", "format: int32" (CRD).
OPERATOR_DEPLOY_TIME_DEFAULT_S = 3600
INT32_MAX = 2**31 - 1


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
    if plan.tier == "remote" and spec.kv_cache.remote_credentials_secret_arn:
        raise RenderError(
            "kv_cache.remote_credentials_secret_arn: the HyperPod operator configures LMCache's "
            "L2 Redis from kvCacheSpec.l2CacheSpec, whose only fields are l2CacheBackend and "
            "l2CacheLocalUrl (InferenceEndpointConfig v1 CRD): it has no Kubernetes Secret "
            "reference, and the operator strips user LMCACHE_* variables. lmikit never writes "
            "credentials into a manifest: use a Redis the cluster reaches without credentials "
            "(network policy, security groups), the managed tiered storage (kv_cache.mode "
            "'cpu+disk'), or deploy to SageMaker, where lmikit's image reads the secret")
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


def endpoint_tags(spec: DeploymentSpec) -> list[dict[str, str]]:
    """``spec.tags`` of the manifest, which the operator puts on the SageMaker endpoint it
    creates (CRD: "Mentions the tags to be added to the Sagemaker Endpoint").

    The deployment is named under :data:`HYPERPOD_DEPLOYMENT_TAG`, never under
    ``lmikit:deployment``: lmikit's SageMaker deploy adopts, and destroy deletes, an endpoint
    whose ``lmikit:deployment`` tag names the deployment (:func:`lmikit.aws.owner_of`), and
    the operator, not lmikit, owns this one.
    """
    reserved = sorted({DEPLOYMENT_TAG, HYPERPOD_DEPLOYMENT_TAG} & set(spec.tags))
    if reserved:
        raise RenderError(
            f"tags: {', '.join(map(repr, reserved))} is lmikit's own tag; on the SageMaker "
            f"endpoint the HyperPod operator creates, {DEPLOYMENT_TAG!r} would let lmikit's "
            "SageMaker deploy and destroy take it for their own. Remove it from tags")
    merged = {**spec.tags, HYPERPOD_DEPLOYMENT_TAG: spec.name}
    return [{"name": k, "value": v} for k, v in sorted(merged.items())]


def commit_sha(spec: DeploymentSpec) -> str | None:
    """``model.revision`` as ``huggingFaceModel.commitSHA``, for either worker.

    The operator downloads a Hugging Face model at a commit only: ``commitSHA`` must be "a
    full 40-character lowercase hex SHA", and without it "the operator defaults to \"main\"
    branch" (CRD). A branch or tag would silently serve other weights than the SageMaker
    target, which pins ``option.revision``, so it is refused; a SHA in capitals is the same
    commit and is written in lowercase. S3 weights have no revision.
    """
    rev = spec.model.revision
    if not rev or spec.model.is_s3:
        return None
    if not _SHA.fullmatch(rev.lower()):
        raise RenderError(
            f"model.revision {rev!r}: the HyperPod operator pins a Hugging Face download by "
            "commit only (huggingFaceModel.commitSHA, a full 40-character hex commit SHA; "
            "without one it downloads the 'main' branch), so a branch or tag cannot be "
            f"honoured: use the 40-character commit SHA {rev!r} points to")
    return rev.lower()


def model_source(spec: DeploymentSpec) -> dict[str, Any]:
    if spec.model.is_s3:
        bucket, _, prefix = spec.model.id[len("s3://"):].partition("/")
        return {"modelSourceType": "s3", "s3Storage": {"bucketName": bucket,
                                                      "region": spec.region},
                "modelLocation": prefix.rstrip("/")}
    hf: dict[str, Any] = {"modelId": spec.model.id}
    sha = commit_sha(spec)
    if sha:
        hf["commitSHA"] = sha
    token = token_secret_ref(spec)
    if token:
        hf["tokenSecretRef"] = token
    return {"modelSourceType": "huggingface", "huggingFaceModel": hf}


def token_secret_ref(spec: DeploymentSpec) -> dict[str, str] | None:
    """``huggingFaceModel.tokenSecretRef`` (a SecretKeySelector, shared CRD): the Secret
    ``model.hf_token_k8s_secret`` names, else ``<name>-hf-token`` (key ``token``) synced
    from ``security.hf_token_secret_arn`` (e.g. by the Secrets Store CSI driver). The
    manifest names the Secret, never holds the token."""
    chosen = spec.model.hf_token_k8s_secret
    if chosen is not None:
        return {"name": chosen.name, "key": chosen.key}
    if spec.security.hf_token_secret_arn:
        return {"name": f"{rfc1123(spec.name)}-hf-token", "key": "token"}
    return None


def max_deploy_time_s(estimate: StartupEstimate) -> int:
    """``maxDeployTimeInSeconds`` from the plan's start-up estimate.

    The expected download + load + warm-up (:attr:`StartupEstimate.expected_s`) with the
    same 1.5x margin as SageMaker's start-up timeouts (:data:`lmikit.planner.MARGIN`),
    rounded up to a whole minute; never below the operator's own default of 3600 s, which
    also has to cover scheduling and the image pull, and never above the CRD's int32.

    >>> from lmikit.planner import estimate_startup
    >>> max_deploy_time_s(estimate_startup(16_000_000_000, "hub"))
    3600
    >>> max_deploy_time_s(estimate_startup(672_900_000_000, "hub"))
    12600
    """
    wanted = math.ceil(MARGIN * estimate.expected_s / 60) * 60
    return int(min(INT32_MAX, max(OPERATOR_DEPLOY_TIME_DEFAULT_S, wanted)))


def uses_operator_cache(spec: DeploymentSpec, plan: Plan) -> bool:
    """Whether the manifest turns on the operator's KV cache or intelligent routing, which
    need a vLLM worker."""
    return plan.tier != "none" or spec.routing.strategy in ROUTING


def worker_choice(spec: DeploymentSpec, plan: Plan, vllm_image: str | None,
                  rows: tuple[OptionRow, ...]) -> WorkerChoice:
    """The vLLM worker image (:data:`lmikit.render.WORKER_IMAGES`): ``vllm_image`` if given
    and not known to be too old for the model, else the default or a newer known one.
    ``rows``: the model's LMI options (:attr:`lmikit.resolve.Resolved.option_rows`)."""
    options = [("--" + r.option.replace("_", "-"), r.value) for r in rows]
    if vllm_image is not None:
        check_image(vllm_image)
    return choose_worker_image(spec.model.catalog_id, plan.architectures, options, vllm_image)


def check_lora_isolation(spec: DeploymentSpec, plan: Plan) -> None:
    """Refuse LoRA next to the operator's LMCache: nothing on the worker can tag requests.

    LMCache's cache key has no LoRA id; only ``lmcache.tag.*`` entries of a request's
    ``kv_transfer_params`` tell adapters apart, and on vLLM's OpenAI server only the client
    sets those (docs/hyperpod.md, "LoRA adapters").
    """
    if not (spec.lora_enabled and plan.tier != "none"):
        return
    raise RenderError(
        "LoRA adapters (engine.lora, adapters) cannot share the HyperPod operator's KV cache "
        f"(kv_cache.mode {spec.kv_cache.mode!r}, tier {plan.tier!r}): LMCache's cache key has "
        "no LoRA id (lmcache/utils.py CacheEngineKey), so a base request and every adapter "
        "reuse one another's KV for the same prompt, which gives wrong answers. Only an "
        "lmcache.tag.* entry in the request's kv_transfer_params separates them, and on vLLM's "
        "OpenAI server, the operator's worker, only the client sets it (vLLM "
        "entrypoints/openai/protocol.py); there is no server-side model.py to enforce it. Turn "
        "LoRA off for HyperPod, set kv_cache.mode 'off' (intelligent routing alone runs no "
        "LMCache), or deploy to SageMaker, where lmikit's model.py tags each adapter's "
        "requests")


def lmi_worker(spec: DeploymentSpec, plan: Plan, *, image: str, resources: dict[str, Any],
               resolved: Resolved) -> dict[str, Any]:
    """The LMI container, loading the weights the operator put under the model mount."""
    full = lmi_environment(spec, plan, resolved=resolved)
    env = {k: v for k, v in full.items()
           if k not in OPERATOR_OWNED and not k.startswith(("LMCACHE_", "LMIKIT_"))}
    # HF_MODEL_ID naming the mounted directory makes LMI serve the operator's download
    # instead of fetching the hub id or S3 prefix again (shared/REFERENCE.md section 5b).
    env["HF_MODEL_ID"] = MODEL_MOUNT
    if not plan.uses_lmcache:
        env["OPTION_ENABLE_PREFIX_CACHING"] = full["OPTION_ENABLE_PREFIX_CACHING"]
    if spec.observability.detailed_metrics:
        env[LMI_PROMETHEUS_ENV] = "true"
    return {
        "image": image,
        "modelInvocationPort": {"containerPort": MODEL_PORT, "name": "http"},
        "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT},
        "resources": resources,
        "environmentVariables": [{"name": k, "value": v} for k, v in env.items()],
    }


def check_operator_fit(manifest: dict[str, Any]) -> None:
    """Refuse a manifest the operator would not wire: a KV cache tier or intelligent routing
    on a worker that is not vLLM's OpenAI server, or metrics scraped off the worker's port."""
    body = manifest["spec"]
    worker = body["worker"]
    cache = body.get("kvCacheSpec") or {}
    cache_on = bool(cache.get("enableL1Cache", True) or cache.get("enableL2Cache"))
    routing_on = bool((body.get("intelligentRoutingSpec") or {}).get("enabled"))
    port = worker["modelInvocationPort"]["containerPort"]
    if cache_on or routing_on:
        what = "kvCacheSpec" if cache_on else "intelligentRoutingSpec"
        lmi_env = [e["name"] for e in worker.get("environmentVariables", [])
                   if e["name"].startswith("OPTION_")]
        if (LMI_IMAGE_MARK in worker["image"] or port != VLLM_PORT or lmi_env
                or worker.get("args", [])[:1] != ["--model"]):
            raise RenderError(f"{what} is on but the worker is not vLLM's OpenAI server "
                              f"(image {worker['image']!r}, port {port}); the operator wires "
                              "the KV cache and routing into vLLM-based workers only")
    metrics = body.get("metrics", {})
    scraped = metrics.get("modelMetrics", {}).get("port")
    if metrics.get("enabled", True) and scraped is not None and scraped != port:
        raise RenderError(f"metrics.modelMetrics.port {scraped} is not the worker's port {port}")


def hyperpod_manifest(spec: DeploymentSpec, plan: Plan, *, image_uri: str,
                      namespace: str = "default",
                      vllm_image: str | None = None, resolved: Resolved | None = None
                      ) -> dict[str, Any]:
    """The InferenceEndpointConfig for ``kubectl apply``.

    ``image_uri`` is the LMI image, used when the manifest needs neither the operator's KV
    cache nor its intelligent routing; otherwise the worker is vLLM's OpenAI server from
    ``vllm_image`` (None: the pinned image of AWS's published sample, or a newer known image
    when the model needs a newer vLLM; :func:`worker_choice`). ``resolved``: the decisions
    of (spec, plan) for the stock image, which the workers' LMI options are rendered for.
    """
    resolved = resolved_for(spec, plan, "stock", resolved)
    check_lora_isolation(spec, plan)
    if spec.security.kms_volume_encryption == "required":
        raise RenderError("security.kms_volume_encryption is 'required', but the HyperPod "
                          "manifest cannot encrypt the worker's volume with "
                          f"security.kms_key_arn: {_NO_CRD_FIELD}. Use 'auto' to accept the "
                          "cluster's encryption, or deploy to SageMaker")
    gated = gated_problem(spec, "hyperpod", resolved.hub_gate)
    if gated:
        raise RenderError(gated)
    name = rfc1123(spec.name)
    memory_gib = math.ceil(plan.min_memory_mb / 1024)
    gpus = str(plan.tp)
    resources = {
        "requests": {"nvidia.com/gpu": gpus, "cpu": str(int(plan.cpu_cores)),
                     "memory": f"{memory_gib}Gi"},
        "limits": {"nvidia.com/gpu": gpus},
    }
    body: dict[str, Any] = {
        "modelName": name,
        "endpointName": hyperpod_endpoint_name(spec.name),
        "instanceType": spec.instance.type,
        "replicas": spec.instance.copies_per_instance * max(1, spec.instance.min_count),
        "maxDeployTimeInSeconds": max_deploy_time_s(resolved.startup),
        "modelSourceConfig": model_source(spec),
        "kvCacheSpec": kv_cache_spec(spec, plan),
        "tags": endpoint_tags(spec),
    }
    if uses_operator_cache(spec, plan):
        image = worker_choice(spec, plan, vllm_image, resolved.option_rows).image
        body["worker"] = vllm_worker(spec, plan, image=image, resources=resources,
                                     resolved=resolved)
        body.update(vllm_spec_fields(spec))
    else:
        body["worker"] = lmi_worker(spec, plan, image=check_image(image_uri, "image_uri"),
                                    resources=resources, resolved=resolved)
        body["metrics"] = ({"enabled": True, "modelMetrics": {"path": LMI_METRICS_PATH,
                                                              "port": MODEL_PORT}}
                           if spec.observability.detailed_metrics else {"enabled": False})
    strategy = spec.routing.strategy
    if strategy in ROUTING:
        body["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": ROUTING[strategy]}
    else:
        body.setdefault("loadBalancer", {})["routingAlgorithm"] = LOAD_BALANCER[strategy]
    manifest = {"apiVersion": API_VERSION, "kind": KIND,
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"app.kubernetes.io/managed-by": "lmikit"}},
                "spec": body}
    check_operator_fit(manifest)
    return manifest


# Why a setting the CRD cannot carry is left out. kvCacheSpec has on/off switches for L1 and
# L2, the L2 backend and URL, and cacheConfigFile: a path inside the worker that "override[s]
# other configurations provided via spec" (CRD), which a manifest cannot ship into the pod.
_OPERATOR_SIZES_LMCACHE = ("the operator configures LMCache itself: kvCacheSpec only turns L1 "
                           "and L2 on or off, and the operator strips user LMCACHE_* variables")
_NO_CRD_FIELD = "the InferenceEndpointConfig v1 CRD has no field for it"


def dropped_settings(spec: DeploymentSpec, plan: Plan) -> list[str]:
    """One note per spec setting the manifest cannot carry, saying what is lost and why."""
    notes: list[str] = []
    kv = spec.kv_cache
    if plan.tier != "none":
        if kv.cpu_size_gb != "auto":
            notes.append(f"kv_cache.cpu_size_gb ({kv.cpu_size_gb:g} GB) is not in the manifest: "
                         f"{_OPERATOR_SIZES_LMCACHE}, so L1's size is the operator's (the pod's "
                         "memory request still includes it)")
        if "chunk_size" in kv.model_fields_set:
            notes.append(f"kv_cache.chunk_size ({kv.chunk_size}) is not in the manifest: "
                         f"{_OPERATOR_SIZES_LMCACHE}, so the chunk size is the operator's")
        if not spec.engine.enable_prefix_caching:
            notes.append("engine.enable_prefix_caching false is not in the manifest: next to the "
                         "operator's KV cache the worker gets no prefix-caching flag (shared/"
                         "REFERENCE.md section 7), so vLLM's own prefix caching stays on, "
                         "vLLM's default")
    if plan.tier == "cpu+disk":
        for field in ("disk_size_gb", "disk_path"):
            if field in kv.model_fields_set:
                notes.append(f"kv_cache.{field} ({getattr(kv, field)}) is not in the manifest: "
                             "the disk tier becomes L2 on the cluster's tiered storage, which "
                             "the cluster sizes and places, not the manifest")
    for field in ("prefix_length", "concurrency_threshold"):
        value = getattr(spec.routing, field)
        if value is not None:
            notes.append(f"routing.{field} ({value}) is not in the manifest: it tunes "
                         "SageMaker's prefix-aware routing, and intelligentRoutingSpec has "
                         "only enabled, routingStrategy and autoScalingSpec (CRD)")
    sec = spec.security
    if sec.network_isolation:
        notes.append("security.network_isolation is not in the manifest: "
                     f"{_NO_CRD_FIELD}; the pod reaches what the cluster's network allows "
                     "(restrict egress with Kubernetes network policies or the cluster's "
                     "security groups)")
    if sec.vpc is not None:
        notes.append("security.vpc is not in the manifest: "
                     f"{_NO_CRD_FIELD}; the pod runs in the HyperPod cluster's own VPC and "
                     "subnets")
    if sec.kms_key_arn:
        notes.append("security.kms_key_arn is not in the manifest: "
                     f"{_NO_CRD_FIELD} (its only kmsKeyId is dataCapture's, for captured "
                     "requests); the weights and volumes are encrypted as the cluster and the "
                     "model's S3 bucket are")
    reservation = spec.instance.capacity_reservation_arn
    if reservation:
        notes.append(f"instance.capacity_reservation_arn ({reservation}) is not in the manifest:"
                     f" {_NO_CRD_FIELD}; the pods run on the cluster's "
                     "nodes, whatever capacity (on demand or a training plan) the cluster's "
                     "instance group was created with")
    return notes


def adapters_note(spec: DeploymentSpec, plan: Plan) -> str:
    """How to serve the spec's adapters with the manifest's worker, which does not ship them."""
    why = ("the manifest enables LoRA serving but does not ship the listed adapters (on "
           "SageMaker each is an inference component; the operator downloads only the base "
           "model): put the adapter files at a path inside the pod (for S3 weights, under the "
           "model's prefix, which the operator downloads to " + MODEL_MOUNT + ")")
    if uses_operator_cache(spec, plan):
        return (why + " and add --lora-modules <name>=<path> to worker.args. vLLM's runtime "
                "LoRA API (/v1/load_lora_adapter) exists only with "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=true, which the manifest does not set: vLLM "
                "0.11.1 warns it is for local development only")
    return (why + f" and register each with djl-serving's adapter API on port {MODEL_PORT} "
            "(POST /models/<model>/adapters?name=<name>&src=<path>; djl-serving "
            "serving/docs/adapters_api.md)")


def hyperpod_notes(spec: DeploymentSpec, plan: Plan, vllm_image: str | None = None, *,
                   resolved: Resolved | None = None) -> list[str]:
    """Operator behaviour a person should know before applying the manifest, every spec
    setting the manifest cannot carry, and what lmikit could not check about the vLLM
    worker image (``vllm_image`` as given to :func:`hyperpod_manifest`)."""
    notes = ["intelligentRoutingSpec.enabled cannot be changed once set, and cannot be added to "
             "an existing deployment: decide routing before the first apply"]
    if spec.routing.strategy == "kv_aware":
        notes.append("kvaware routing matches /v1/completions prompts, not chat messages "
                     "(invocationEndpoint is v1/completions); AWS recommends operator >= v3.1.3 "
                     "with a vLLM image >= v0.19.1 or an LMCache image >= v0.4.3 for it: pass "
                     f"one with --vllm-image (lmikit knows {WORKER_IMAGES[1].image})")
    if spec.adapters:
        notes.append(adapters_note(spec, plan))
    if spec.security.hf_token_secret_arn and spec.model.hf_token_k8s_secret is None:
        notes.append(f"create the Kubernetes Secret {rfc1123(spec.name)}-hf-token (key 'token') "
                     "from the Secrets Manager secret before applying")
    notes += dropped_settings(spec, plan)
    if not uses_operator_cache(spec, plan):
        return notes
    rows = resolved_for(spec, plan, "stock", resolved).option_rows
    choice = worker_choice(spec, plan, vllm_image, rows)
    note = choice_note(spec.model.catalog_id, plan.architectures, choice)
    if note:
        notes.append(note)
    if rows and choice.vllm_version is None:
        names = ", ".join(r.option for r in rows)
        notes.append(f"{spec.model.catalog_id}'s options ({names}) were checked against vLLM "
                     f"{VLLM_VERSION}, LMI's: the worker image must accept them")
    return notes
