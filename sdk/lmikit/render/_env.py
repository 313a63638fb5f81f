"""LMI settings for the base model: ``serving.properties``, ``OPTION_*`` and process env.

One model definition, never two (djl-serving@master ``ModelStore.initialize``: a file in
``/opt/ml/model`` registers that directory as a model, and ``HF_MODEL_ID`` would register a
second one). So:

- weights from the Hub or copied by LMI from S3: the model artifact's ``serving.properties``
  names them with ``option.model_id`` (and ``option.revision``); no ``HF_MODEL_ID``;
- weights copied by SageMaker into ``/opt/ml/model`` (network isolation): no
  ``serving.properties`` and no ``model_id``; LMI loads the directory itself and every
  option is an ``OPTION_*`` variable of the SageMaker Model.

Requests go to vLLM's async service (``rolling_batch=disable``, ``async_mode=true``,
``entryPoint=djl_python.lmi_vllm.vllm_async_service``), which also serves streaming and
stateful sessions. Every key rendered here has a row in :mod:`lmikit.render._lmi_options`.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "d", "region":
...     "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> env = lmi_environment(spec, plan_spec(spec))
>>> env["OPTION_ROLLING_BATCH"], env["OPTION_ENABLE_STATEFUL_SESSIONS"], "HF_MODEL_ID" in env
('disable', 'true', False)
"""

from __future__ import annotations

import json

from lmikit.catalog import MODEL_DIR, ImageKind
from lmikit.errors import RenderError
from lmikit.metric_catalog import CONTAINER_NAMESPACE, EMF_CONFIG_ENV
from lmikit.names import MODEL_ID_ENV, base_component_name
from lmikit.planner import Plan, WeightsSource, weights_source
from lmikit.render._lmcache import LMCACHE_FILE_NAME, lmcache_config
from lmikit.render._lmi_options import row
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

DEFAULT_MAX_LORAS = 4
MIN_LORA_RANK = 16
ASYNC_ENTRYPOINT = "djl_python.lmi_vllm.vllm_async_service"
SERVING_PROPERTIES = "serving.properties"
# What stays in the inference component's environment: process-level settings, what lmikit's
# start-up step replaces at start (OPTION_LMCACHE_CONFIG_FILE: an env value yields to the
# exported one, a serving.properties line would not), what the adapter registry and the
# session client read back (LoRA limits, sessions, the model id), and the entry point. Every
# other option goes to serving.properties, because CloudFormation caps an inference
# component's Environment at 16 entries (the API allows 100).
CONTAINER_ENV_KEYS = frozenset({
    "PYTHONHASHSEED", "OPTION_ENTRYPOINT", "OPTION_ENABLE_LORA", "OPTION_MAX_LORA_RANK",
    "OPTION_LMCACHE_CONFIG_FILE", "OPTION_ENABLE_STATEFUL_SESSIONS",
    "OPTION_SESSIONS_EXPIRATION", "SERVING_PROMETHEUS", MODEL_ID_ENV, "LMCACHE_TRACK_USAGE",
})
# LMCache sends usage telemetry, the remote URL and model name included, over plain HTTP
# unless this is "false" (row LMCACHE_TRACK_USAGE): set wherever LMCache runs.
TELEMETRY_OFF = {"LMCACHE_TRACK_USAGE": "false"}
CFN_ENVIRONMENT_MAX = 16
# lmikit's image: Secrets Manager secrets read at start (lmikit_runtime.start); only their
# ARNs are ever rendered.
HF_TOKEN_SECRET_ENV = "LMIKIT_HF_TOKEN_SECRET_ARN"
KV_REMOTE_CREDENTIALS_ENV = "LMIKIT_KV_REMOTE_CREDENTIALS_SECRET_ARN"
EMF_MIN_INTERVAL_S = 60


def _flag(value: bool) -> str:
    # LMI compares some of these to the exact lowercase string "true".
    return "true" if value else "false"


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def model_options(spec: DeploymentSpec, *, resolved: Resolved | None = None
                  ) -> dict[str, str]:
    """The model definition (``option.<key>`` names), empty when SageMaker puts the weights
    in /opt/ml/model and LMI loads that directory."""
    source = resolved.weights_source if resolved else weights_source(spec)
    if source == "s3-sagemaker":
        return {}
    out = {"model_id": spec.model.id}
    if spec.model.revision:
        out["revision"] = spec.model.revision
    return out


def draft_model_location(spec: DeploymentSpec, source: WeightsSource) -> str | None:
    """What ``speculative_config.model`` names: the draft's hub id, or its path inside
    /opt/ml/model when it lies under the S3 weights SageMaker copies there."""
    sp = spec.engine.speculative
    if sp is None:
        return None
    if not sp.draft_model.startswith("s3://"):
        return sp.draft_model
    prefix = spec.model.id.rstrip("/") + "/"
    if source == "s3-sagemaker" and sp.draft_model.startswith(prefix):
        rest = sp.draft_model[len(prefix):].strip("/")
        if rest:
            return f"{MODEL_DIR}/{rest}"
    raise RenderError(
        f"engine.speculative.draft_model {sp.draft_model!r}: LMI does not download a draft "
        "named in speculative_config. Put the draft under model.id's S3 prefix with "
        "security.network_isolation on (SageMaker then copies both into /opt/ml/model), or "
        "use a Hugging Face id")


def lmi_options(spec: DeploymentSpec, plan: Plan, resolved: Resolved) -> dict[str, str]:
    """Every LMI option but the model definition, by ``option.<key>`` name."""
    e = spec.engine
    start = resolved.startup
    opts: dict[str, str] = {
        "entryPoint": ASYNC_ENTRYPOINT,
        "rolling_batch": "disable",
        "async_mode": "true",
        # The async path reads max_rolling_batch_size (-> vLLM max_num_seqs); unset it is
        # 32 there, not the 256 of rolling_batch=vllm.
        "max_rolling_batch_size": str(e.max_batch_size),
        "tensor_parallel_degree": str(e.tensor_parallel_degree),
        "max_model_len": str(plan.max_model_len),
        "gpu_memory_utilization": f"{e.gpu_memory_utilization:g}",
        "enable_prefix_caching": _flag(e.enable_prefix_caching),
        "model_loading_timeout": str(start.model_loading_timeout_s),
    }
    if e.kv_cache_dtype != "auto":
        opts["kv_cache_dtype"] = e.kv_cache_dtype
    if plan.uses_lmcache:
        opts["kv_transfer_config"] = _json({"kv_connector": "LMCacheConnectorV1",
                                            "kv_role": "kv_both"})
        if not resolved.sagemaker_copies_weights:
            opts["lmcache_config_file"] = LMCACHE_FILE_NAME  # in the model artifact
    if spec.sessions_enabled:
        # Only ever "true": the async service leaves sessions unset on any other value.
        opts["enable_stateful_sessions"] = "true"
        opts["sessions_expiration"] = str(spec.sessions.expiration_seconds)
    if spec.lora_enabled:
        lora = e.lora
        ranks = [a.rank for a in spec.adapters if a.rank]
        rank = max([lora.max_rank or MIN_LORA_RANK, *ranks])
        loras = lora.max_adapters or max(DEFAULT_MAX_LORAS, min(len(spec.adapters), 64))
        opts["enable_lora"] = "true"
        opts["max_loras"] = str(loras)
        opts["max_lora_rank"] = str(lora_rank_limit(rank))
        opts["max_cpu_loras"] = str(max(len(spec.adapters), loras))
    if e.speculative:
        draft = draft_model_location(spec, resolved.weights_source)
        opts["speculative_config"] = _json({
            "method": e.speculative.method, "model": draft,
            "num_speculative_tokens": e.speculative.num_speculative_tokens})
    # What this model needs (tokenizer/config/load format, multimodal limits, ...): rows of
    # lmikit.catalog._model_options, each with its source.
    opts |= {r.option: r.value for r in resolved.option_rows}
    return opts


def lmi_environment(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                    resolved: Resolved | None = None) -> dict[str, str]:
    """Every LMI option as ``OPTION_*`` plus the process environment the image needs.

    The model definition is not in it (see :func:`model_options`). Never holds a secret: with
    lmikit's image the HF token and the remote KV tier's credentials are fetched from Secrets
    Manager at start (``LMIKIT_HF_TOKEN_SECRET_ARN``, ``LMIKIT_KV_REMOTE_CREDENTIALS_SECRET_ARN``:
    ARNs only); the stock image cannot read one (the SageMaker renderer refuses that).
    ``resolved``: the decisions of (spec, plan, image), when the caller made them.
    """
    resolved = resolved_for(spec, plan, image, resolved)
    env = {"PYTHONHASHSEED": "0"} | (TELEMETRY_OFF if plan.uses_lmcache else {})
    env |= {row(k).env_name: v for k, v in lmi_options(spec, plan, resolved).items()}
    if spec.observability.detailed_metrics:
        env |= resolved.metrics_endpoint.env
    if image == "lmikit":
        if plan.uses_lmcache:
            env["LMIKIT_PLAN"] = plan_contract(spec, plan)
        if spec.security.hf_token_secret_arn:
            env[HF_TOKEN_SECRET_ENV] = spec.security.hf_token_secret_arn
        credentials = spec.kv_cache.remote_credentials_secret_arn
        if credentials and plan.tier == "remote":
            env[KV_REMOTE_CREDENTIALS_ENV] = credentials
    elif plan.uses_lmcache and resolved.sagemaker_copies_weights:
        env |= lmcache_environment(plan)
    return dict(sorted(env.items()))


def lmcache_environment(plan: Plan) -> dict[str, str]:
    """The planned LMCache settings as LMCache's own ``LMCACHE_<KEY>`` variables (read when
    no config file is named: LMCache 0.5.6 ``lmcache_get_or_create_config`` ->
    ``LMCacheEngineConfig.from_env``)."""
    out = {}
    for key, value in lmcache_config(plan).items():
        if isinstance(value, bool):
            text = _flag(value)
        elif isinstance(value, dict):
            text = _json(value)
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = str(value)
        out[f"LMCACHE_{key.upper()}"] = text
    return out


def emf_config(spec: DeploymentSpec) -> str:
    """``LMIKIT_EMF``: the container's EMF emitter settings (JSON). Dimension values name the
    endpoint and the base component, as the dashboard and alarms do; the interval follows
    ``metric_publish_frequency_seconds`` but never below 60 s (standard resolution)."""
    interval = max(EMF_MIN_INTERVAL_S, spec.observability.metric_publish_frequency_seconds)
    return json.dumps({"namespace": CONTAINER_NAMESPACE,
                       "dimensions": {"EndpointName": spec.name,
                                      "InferenceComponentName": base_component_name(spec.name)},
                       "interval_s": interval}, separators=(",", ":"))


def _sagemaker_extras(spec: DeploymentSpec, resolved: Resolved) -> dict[str, str]:
    """SageMaker-only variables: the model id for the adapter registry and, with lmikit's
    image, ``LMIKIT_EMF`` (its dimensions name a SageMaker endpoint and component, so the
    HyperPod manifest, built from ``lmi_environment``, never gets it)."""
    out = {MODEL_ID_ENV: spec.model.id}
    if resolved.publishes_cache_metrics:
        out[EMF_CONFIG_ENV] = emf_config(spec)
    return out


def container_environment(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                          resolved: Resolved | None = None) -> dict[str, str]:
    """The inference component's ``Container.Environment`` (at most 16 entries) when the
    model artifact carries ``serving.properties``."""
    resolved = resolved_for(spec, plan, image, resolved)
    env = {k: v for k, v in lmi_environment(spec, plan, image=image, resolved=resolved).items()
           if k in CONTAINER_ENV_KEYS or k.startswith("LMIKIT_")}
    env |= _sagemaker_extras(spec, resolved)
    return dict(sorted(env.items()))


def model_environment(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                      resolved: Resolved | None = None) -> dict[str, str]:
    """The SageMaker Model's ``PrimaryContainer.Environment`` when SageMaker copies the
    weights into /opt/ml/model: every option as ``OPTION_*`` (there is no serving.properties;
    CloudFormation's AWS::SageMaker::Model has no 16-entry cap)."""
    resolved = resolved_for(spec, plan, image, resolved)
    env = (lmi_environment(spec, plan, image=image, resolved=resolved)
           | _sagemaker_extras(spec, resolved))
    return dict(sorted(env.items()))


def serving_properties(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                       resolved: Resolved | None = None) -> str:
    """The model artifact's ``serving.properties``: the model definition and every option
    not in :func:`container_environment`. Values are escaped for java.util.Properties."""
    resolved = resolved_for(spec, plan, image, resolved)
    if resolved.sagemaker_copies_weights:
        raise RenderError("no serving.properties when SageMaker copies the weights into "
                          "/opt/ml/model: the options are the Model's environment")
    in_env = container_environment(spec, plan, image=image, resolved=resolved)
    lines = ["# LMI options rendered by lmikit from the deployment spec", "engine=Python"]
    options = model_options(spec, resolved=resolved) | lmi_options(spec, plan, resolved)
    for key, value in options.items():
        option = row(key)
        if option.env_name in in_env:
            continue
        lines.append(f"{option.property_name}={_escape_property(value)}")
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


def lora_rank_limit(rank: int) -> int:
    """vLLM accepts max_lora_rank from a fixed set (vllm/config/lora.py MaxLoRARanks); take
    the smallest that fits, never below 16 (vLLM's default).

    >>> lora_rank_limit(8), lora_rank_limit(17), lora_rank_limit(300)
    (16, 32, 320)
    """
    for allowed in (8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= allowed:
            return max(allowed, MIN_LORA_RANK)
    return 512
