"""LMI container environment (``OPTION_*`` and friends) for the base inference component.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.plan import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "d", "region":
...     "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> lmi_environment(spec, plan_spec(spec))["OPTION_ENABLE_STATEFUL_SESSIONS"]
'true'
"""

from __future__ import annotations

import json

from lmikit.catalog import model_options
from lmikit.metric_catalog import CONTAINER_NAMESPACE, EMF_CONFIG_ENV
from lmikit.names import base_component_name
from lmikit.plan import Plan
from lmikit.render.lmcache import LMCACHE_FILE_NAME
from lmikit.spec import DeploymentSpec

DEFAULT_MAX_LORAS = 4
MIN_LORA_RANK = 16
SERVING_PROPERTIES = "serving.properties"
# What stays in the container's environment: process-level settings, what our start-up step,
# the adapter registry and the session client read back (LoRA limits, sessions), and the model
# id for people reading the console. Every other LMI option goes to serving.properties in the
# model artifact, because CloudFormation caps an inference component's Environment at 16
# entries (the API allows 100).
CONTAINER_ENV_KEYS = frozenset({
    "HF_MODEL_ID", "PYTHONHASHSEED", "OPTION_ENTRYPOINT", "OPTION_ENABLE_LORA",
    "OPTION_MAX_LORA_RANK", "OPTION_LMCACHE_CONFIG_FILE", "OPTION_ENABLE_STATEFUL_SESSIONS",
    "OPTION_SESSIONS_EXPIRATION",
})
CFN_ENVIRONMENT_MAX = 16
EMF_MIN_INTERVAL_S = 60


def _flag(value: bool) -> str:
    # LMI compares these to the exact lowercase string "true".
    return "true" if value else "false"


def lmi_environment(spec: DeploymentSpec, plan: Plan, *,
                    lmcache_config_file: str = LMCACHE_FILE_NAME) -> dict[str, str]:
    """Environment for the LMI container. Never holds a secret: the HF token is fetched
    from Secrets Manager at container start (``LMIKIT_HF_TOKEN_SECRET_ARN``)."""
    e = spec.engine
    env: dict[str, str] = {
        "HF_MODEL_ID": spec.model.id,
        "PYTHONHASHSEED": "0",
        "OPTION_ROLLING_BATCH": "vllm",
        "OPTION_ASYNC_MODE": "true",
        "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
        "OPTION_TENSOR_PARALLEL_DEGREE": str(e.tensor_parallel_degree),
        "OPTION_MAX_MODEL_LEN": str(plan.max_model_len),
        "OPTION_GPU_MEMORY_UTILIZATION": f"{e.gpu_memory_utilization:g}",
        "OPTION_MAX_ROLLING_BATCH_SIZE": str(e.max_batch_size),
        "OPTION_ENABLE_PREFIX_CACHING": _flag(e.enable_prefix_caching),
    }
    if spec.model.revision:
        env["OPTION_REVISION"] = spec.model.revision
    if e.kv_cache_dtype != "auto":
        env["OPTION_KV_CACHE_DTYPE"] = e.kv_cache_dtype
    if plan.uses_lmcache:
        env["OPTION_KV_TRANSFER_CONFIG"] = json.dumps(
            {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}, separators=(",", ":"))
        env["OPTION_LMCACHE_CONFIG_FILE"] = lmcache_config_file
        env["LMIKIT_PLAN"] = plan_contract(spec, plan)
    if spec.sessions_enabled:
        env["OPTION_ENABLE_STATEFUL_SESSIONS"] = "true"
        env["OPTION_SESSIONS_EXPIRATION"] = str(spec.sessions.expiration_seconds)
    if spec.lora_enabled:
        lora = e.lora
        ranks = [a.rank for a in spec.adapters if a.rank]
        rank = max([lora.max_rank or MIN_LORA_RANK, *ranks])
        loras = lora.max_adapters or max(DEFAULT_MAX_LORAS, min(len(spec.adapters), 64))
        env["OPTION_ENABLE_LORA"] = "true"
        env["OPTION_MAX_LORAS"] = str(loras)
        env["OPTION_MAX_LORA_RANK"] = str(_lora_rank_limit(rank))
        env["OPTION_MAX_CPU_LORAS"] = str(max(len(spec.adapters), loras))
    if e.speculative:
        env["OPTION_SPECULATIVE_CONFIG"] = json.dumps({
            "method": e.speculative.method,
            "model": e.speculative.draft_model,
            "num_speculative_tokens": e.speculative.num_speculative_tokens,
        }, separators=(",", ":"))
    if spec.security.hf_token_secret_arn:
        env["LMIKIT_HF_TOKEN_SECRET_ARN"] = spec.security.hf_token_secret_arn
    if spec.observability.detailed_metrics:
        env["LMIKIT_METRICS_PATH"] = spec.observability.metrics_path
    env.update(model_options.lmi_options(spec.model.id, e.tensor_parallel_degree))
    return dict(sorted(env.items()))


def emf_config(spec: DeploymentSpec) -> str:
    """``LMIKIT_EMF``: the container's EMF emitter settings (JSON). Dimension values name the
    endpoint and the base component, as the dashboard and alarms do; the interval follows
    ``metric_publish_frequency_seconds`` but never below 60 s (standard resolution)."""
    interval = max(EMF_MIN_INTERVAL_S, spec.observability.metric_publish_frequency_seconds)
    return json.dumps({"namespace": CONTAINER_NAMESPACE,
                       "dimensions": {"EndpointName": spec.name,
                                      "InferenceComponentName": base_component_name(spec.name)},
                       "interval_s": interval}, separators=(",", ":"))


def container_environment(spec: DeploymentSpec, plan: Plan) -> dict[str, str]:
    """The inference component's ``Container.Environment`` (at most 16 entries).

    Adds ``LMIKIT_EMF`` (with detailed metrics) here rather than in :func:`lmi_environment`:
    its dimensions name the SageMaker endpoint and inference component, so it belongs to
    the SageMaker container only (the HyperPod manifest, built from ``lmi_environment``,
    has no such component).
    """
    env = {k: v for k, v in lmi_environment(spec, plan).items()
           if k in CONTAINER_ENV_KEYS or k.startswith("LMIKIT_")}
    if spec.observability.detailed_metrics:
        env[EMF_CONFIG_ENV] = emf_config(spec)
    return dict(sorted(env.items()))


def serving_properties(spec: DeploymentSpec, plan: Plan) -> str:
    """The LMI options not in the environment, as the model dir's ``serving.properties``.

    ``OPTION_FOO_BAR`` becomes ``option.foo_bar`` (LMI's own mapping); values are escaped for
    java.util.Properties.
    """
    env = container_environment(spec, plan)
    lines = ["# LMI options rendered by lmikit from the deployment spec", "engine=Python"]
    for key, value in lmi_environment(spec, plan).items():
        if key in env or not key.startswith("OPTION_"):
            continue
        lines.append(f"option.{key[len('OPTION_'):].lower()}={_escape_property(value)}")
    return "\n".join(lines) + "\n"


def _escape_property(value: str) -> str:
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "".join(c if ord(c) < 128 else f"\\u{ord(c):04x}" for c in out)


def plan_contract(spec: DeploymentSpec, plan: Plan) -> str:
    """What the container's start-up sizing needs from the plan (``LMIKIT_PLAN``, JSON).

    Sizes stay "auto" unless the spec fixed them, so the container sizes them from the host
    it actually landed on (cgroup limit, free NVMe space) with the planner's arithmetic.
    """
    kv = spec.kv_cache
    return json.dumps({
        "tier": plan.tier, "weight_bytes": plan.weight_bytes, "copies": plan.copies,
        "tp": plan.tp, "chunk_size": kv.chunk_size, "cpu_size_gb": kv.cpu_size_gb,
        "disk_size_gb": kv.disk_size_gb if plan.tier == "cpu+disk" else "auto",
        "disk_path": kv.disk_path, "remote_url": plan.lmcache.get("remote_url"),
    }, separators=(",", ":"), sort_keys=True)


def _lora_rank_limit(rank: int) -> int:
    """vLLM accepts max_lora_rank from a fixed set; take the smallest that fits."""
    for allowed in (8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= allowed:
            return max(allowed, MIN_LORA_RANK)
    return 512
