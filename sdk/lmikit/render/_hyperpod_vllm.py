"""The vLLM worker the HyperPod inference operator wires its KV cache and routing into.

The operator supports ``kvCacheSpec`` and ``intelligentRoutingSpec`` for vLLM-based workers
only. Its samples run vLLM's OpenAI server on port 8000 with the model the operator downloaded
under ``/opt/ml/model``; the operator adds LMCache's connector and ``LMCACHE_*`` settings itself.
This module renders that worker from the same LMI options the SageMaker container gets, so the
numbers (context length, batch size, LoRA limits, ...) are the same on both targets.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "d", "region":
...     "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> w = vllm_worker(spec, plan_spec(spec), image=DEFAULT_VLLM_IMAGE)
>>> w["args"][:4], w["modelInvocationPort"]["containerPort"]
(['--model', '/opt/ml/model', '--port', '8000'], 8000)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmikit.catalog import VLLM_VERSION as LMI_VLLM_VERSION
from lmikit.catalog import OptionRow
from lmikit.errors import RenderError
from lmikit.planner import Plan
from lmikit.render._env import lmi_environment
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

AWS_DOC = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
           "sagemaker-hyperpod-model-deployment-caching-routing.html")
OPERATOR_SAMPLES = ("github.com/aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/charts/"
                    "inference-operator/config/samples/v1_llama31_8b_kv_cache_l1_l2.yaml and "
                    "v1_llama31_8b_intelligent_routing.yaml (commit 3d2049bd, 2025-10-28)")
AWS_BLOG = ("AWS Machine Learning Blog, 'Managed Tiered KV Cache and Intelligent Routing for "
            "Amazon SageMaker HyperPod' (2025-11-26), manifest section")
DLC_SOURCE = ("github.com/aws/deep-learning-containers vllm/x86_64/gpu/Dockerfile (FROM "
              "vllm/vllm-openai:v0.11.1; ec2 ENTRYPOINT dockerd_entrypoint.sh) and "
              "vllm/x86_64/build_artifacts/dockerd_entrypoint.sh (python3 -m "
              "vllm.entrypoints.openai.api_server \"$@\")")
VLLM_SOURCE = "vLLM 0.11.1 (PyPI wheel vllm==0.11.1)"


@dataclass(frozen=True)
class OperatorFact:
    """One fact about the operator or its worker that the renderer relies on."""

    name: str
    value: str
    source: str


# Facts the vLLM worker is rendered from, each with where it was read. Tests read this table.
FACTS: tuple[OperatorFact, ...] = (
    OperatorFact("kv cache and routing need a vLLM worker",
                 "kvCacheSpec and intelligentRoutingSpec support only vLLM-based containers",
                 AWS_DOC + " (Note under the introduction)"),
    OperatorFact("worker image", "public.ecr.aws/deep-learning-containers/vllm:"
                 "0.11.1-gpu-py312-cu129-ubuntu22.04-ec2-v1.0",
                 AWS_BLOG + "; the AWS doc's kvaware compatibility table pairs vLLM image "
                 "v0.11.1 with operator < v3.1.3 (" + AWS_DOC + ")"),
    OperatorFact("vLLM version in the worker image", "0.11.1", DLC_SOURCE),
    OperatorFact("worker entrypoint", "python3 -m vllm.entrypoints.openai.api_server",
                 DLC_SOURCE),
    OperatorFact("container port", "8000",
                 OPERATOR_SAMPLES + "; " + AWS_BLOG + "; FrontendArgs.port default in "
                 "vllm/entrypoints/openai/cli_args.py, " + VLLM_SOURCE),
    OperatorFact("container port name", "http", OPERATOR_SAMPLES + "; " + AWS_BLOG),
    OperatorFact("model volume mount", "model-weights at /opt/ml/model",
                 OPERATOR_SAMPLES + "; " + AWS_BLOG),
    OperatorFact("model argument", "--model /opt/ml/model (flag form for the api_server "
                 "entrypoint; the operator samples' lmcache/vllm-openai image takes it "
                 "positionally)", AWS_BLOG + "; " + OPERATOR_SAMPLES),
    OperatorFact("metrics path and port", "/metrics on the container port",
                 "mount_metrics in vllm/entrypoints/openai/api_server.py, " + VLLM_SOURCE
                 + "; the modelMetrics port must equal modelInvocationPort.containerPort ("
                 + AWS_DOC + ", step 3)"),
    OperatorFact("health check path", "/health",
                 "loadBalancer.healthCheckPath in " + OPERATOR_SAMPLES + " and " + AWS_BLOG
                 + "; GET /health in vllm/entrypoints/openai/api_server.py, " + VLLM_SOURCE),
    OperatorFact("invocation endpoint", "v1/chat/completions; v1/completions with kvaware",
                 OPERATOR_SAMPLES + "; kvaware supports only the completions API (" + AWS_DOC
                 + ", KV-aware routing compatibility)"),
    OperatorFact("operator-owned LMCache settings",
                 "no --kv-transfer-config and no LMCACHE_* variables in the manifest but "
                 "LMCACHE_TRACK_USAGE=false (and DO_NOT_TRACK=1, which survives stripping)",
                 "none in " + OPERATOR_SAMPLES + " or " + AWS_BLOG + "; the operator strips "
                 "user LMCACHE_* variables and injects LMCACHE_REMOTE_URL=sagemaker-hyperpod://"
                 "$(NODE_IP):9200 for tieredstorage (shared/REFERENCE.md section 7)"),
    OperatorFact("prefix caching flag", "not passed with the operator's KV cache",
                 "shared/REFERENCE.md section 7 (not re-verified here); the samples pass none"),
    OperatorFact("model option values the default image's vLLM accepts",
                 "--tokenizer-mode auto, slow, mistral or custom; --mm-encoder-tp-mode "
                 "weights or data",
                 "TokenizerMode in vllm/config/model.py and MMEncoderTPMode in "
                 "vllm/config/multimodal.py, which literal_to_kwargs in "
                 "vllm/engine/arg_utils.py turns into argparse choices, " + VLLM_SOURCE),
    OperatorFact("served model names", "the spec's model.id, then /opt/ml/model",
                 "ModelConfig.served_model_name in vllm/config/model.py (the server answers to "
                 "any of the names and reports the first) and init_app_state's fallback to "
                 "--model in vllm/entrypoints/openai/api_server.py, " + VLLM_SOURCE
                 + "; " + OPERATOR_SAMPLES + " and " + AWS_BLOG + " set none, so their "
                 "clients send /opt/ml/model"),
    OperatorFact("PYTHONHASHSEED", "0",
                 "LMCache chunk hashes must agree across processes (shared/REFERENCE.md "
                 "section 5); aws-samples/sagemaker-genai-hosting-examples SageMakerHyperpod/"
                 "hyperpod-inference/Hyperpod_Inference_KV_Cache_Admin_Notebook_S3.ipynb sets it "
                 "on the vLLM worker"),
)

DEFAULT_VLLM_IMAGE = "public.ecr.aws/deep-learning-containers/vllm:" \
    "0.11.1-gpu-py312-cu129-ubuntu22.04-ec2-v1.0"
VLLM_VERSION = "0.11.1"
VLLM_PORT = 8000
VLLM_METRICS_PATH = "/metrics"
VLLM_HEALTH_PATH = "/health"
MODEL_MOUNT = "/opt/ml/model"
MODEL_VOLUME = "model-weights"
CHAT_ENDPOINT = "v1/chat/completions"
COMPLETIONS_ENDPOINT = "v1/completions"

# LMI option (as lmi_environment renders it) -> vLLM 0.11.1 flag. LMI hands options named like
# vLLM EngineArgs fields to vLLM (shared/REFERENCE.md section 5b); these are the ones whose LMI
# name differs from the flag or that the vLLM worker needs under its own name.
VLLM_FLAGS: dict[str, str] = {
    "OPTION_TENSOR_PARALLEL_DEGREE": "--tensor-parallel-size",
    "OPTION_MAX_MODEL_LEN": "--max-model-len",
    "OPTION_GPU_MEMORY_UTILIZATION": "--gpu-memory-utilization",
    "OPTION_MAX_ROLLING_BATCH_SIZE": "--max-num-seqs",
    "OPTION_KV_CACHE_DTYPE": "--kv-cache-dtype",
    "OPTION_ENABLE_LORA": "--enable-lora",
    "OPTION_MAX_LORAS": "--max-loras",
    "OPTION_MAX_LORA_RANK": "--max-lora-rank",
    "OPTION_MAX_CPU_LORAS": "--max-cpu-loras",
    "OPTION_SPECULATIVE_CONFIG": "--speculative-config",
}
BOOLEAN_FLAGS = frozenset({"OPTION_ENABLE_LORA"})
# Flags of the model options (lmikit.catalog._model_options) whose value vLLM 0.11.1, the
# default image's, takes from a fixed list: argparse choices built from a Literal type (FACTS,
# "model option values the default image's vLLM accepts"). The server exits at argument
# parsing on any other value.
DEFAULT_IMAGE_CHOICES: dict[str, tuple[str, ...]] = {
    "--tokenizer-mode": ("auto", "slow", "mistral", "custom"),
    "--mm-encoder-tp-mode": ("weights", "data"),
}
# LMI environment entries the vLLM worker does not take, and why.
NOT_FOR_VLLM: dict[str, str] = {
    "HF_MODEL_ID": "the operator downloads the model to the mount; --model names that path",
    "OPTION_REVISION": "pinned by modelSourceConfig.huggingFaceModel.commitSHA",
    "OPTION_ROLLING_BATCH": "LMI's engine choice",
    "OPTION_ASYNC_MODE": "LMI's handler choice",
    "OPTION_ENTRYPOINT": "LMI's handler choice",
    "OPTION_ENABLE_PREFIX_CACHING": "vLLM's default; not passed with the operator's KV cache",
    "OPTION_KV_TRANSFER_CONFIG": "the operator wires the LMCache connector",
    "OPTION_LMCACHE_CONFIG_FILE": "the operator configures LMCache from kvCacheSpec",
    "OPTION_ENABLE_STATEFUL_SESSIONS": "LMI sessions; the operator's session routing pins them",
    "OPTION_SESSIONS_EXPIRATION": "LMI sessions; the operator's session routing pins them",
    "OPTION_MODEL_LOADING_TIMEOUT": "LMI's own model-loading limit; vLLM's server has none "
                                    "(the pod's readiness check on /health bounds start-up)",
    "SERVING_PROMETHEUS": "DJL's metrics switch; vLLM serves /metrics on its port itself",
}
# Carried into the worker environment unchanged.
VLLM_ENV_KEYS = frozenset({"PYTHONHASHSEED"})
# LMCache's usage telemetry off in the worker, by both of its switches: the operator may drop
# user LMCACHE_* variables, and DO_NOT_TRACK is honoured from LMCache 0.5.2 only (rows
# LMCACHE_TRACK_USAGE and DO_NOT_TRACK in lmikit.render._lmi_options).
VLLM_TELEMETRY_OFF = {"DO_NOT_TRACK": "1", "LMCACHE_TRACK_USAGE": "false"}


def check_image(image: str, field: str = "vllm_image") -> str:
    """A pinned image reference: a tag other than ``latest``, or a digest."""
    name = image.rsplit("/", 1)[-1]
    if not image or image != image.strip() or ("@" not in name and ":" not in name):
        raise RenderError(f"{field} {image!r} must name a pinned tag or digest, e.g. "
                          f"{DEFAULT_VLLM_IMAGE!r}")
    if "@" not in name and name.rsplit(":", 1)[1] == "latest":
        raise RenderError(f"{field} {image!r}: 'latest' is not pinned; name a version tag")
    return image


def served_model_names(spec: DeploymentSpec) -> list[str]:
    """The names vLLM answers to (FACTS, "served model names"): the spec's ``model.id``,
    which lmikit's SageMaker client also sends, first (vLLM reports it in responses and
    metrics), then the mount path, vLLM's own default, which clients written for the
    operator's samples send."""
    return [spec.model.id, MODEL_MOUNT]


def vllm_args(spec: DeploymentSpec, plan: Plan, resolved: Resolved) -> list[str]:
    """vLLM OpenAI-server arguments, flag then value, derived from the LMI options."""
    env = lmi_environment(spec, plan, resolved=resolved)
    args = ["--model", MODEL_MOUNT, "--port", str(VLLM_PORT),
            "--served-model-name", *served_model_names(spec)]
    for option, flag in VLLM_FLAGS.items():
        if option not in env:
            continue
        if option in BOOLEAN_FLAGS:
            if env[option] == "true":
                args.append(flag)
            continue
        args += [flag, env[option]]
    if not plan.uses_lmcache and not spec.engine.enable_prefix_caching:
        args.append("--no-enable-prefix-caching")
    return args + model_option_args(resolved.option_rows)


def model_option_args(rows: tuple[OptionRow, ...]) -> list[str]:
    """The model's own options (:mod:`lmikit.catalog`). Each is named after a
    vLLM ``EngineArgs`` field, which vLLM's server takes as ``--<name with dashes>``."""
    args: list[str] = []
    for row in rows:
        args += ["--" + row.option.replace("_", "-"), row.value]
    return args


def check_model_options(spec: DeploymentSpec, image: str, rows: tuple[OptionRow, ...]
                        ) -> None:
    """Refuse a model option the default image's vLLM rejects at start.

    Another image's vLLM version is not known here: its options stay the user's to check
    (a note says so, :func:`lmikit.render.hyperpod_notes`).
    """
    if image != DEFAULT_VLLM_IMAGE:
        return
    for row in rows:
        flag = "--" + row.option.replace("_", "-")
        allowed = DEFAULT_IMAGE_CHOICES.get(flag)
        if allowed is not None and row.value not in allowed:
            raise RenderError(
                f"model.id {spec.model.id!r} needs {flag} {row.value} (vLLM "
                f"{LMI_VLLM_VERSION}, as LMI ships it, accepts it), but the default "
                f"vLLM image runs vLLM {VLLM_VERSION}, whose {flag} accepts only "
                f"{', '.join(allowed)}: the worker would exit at start. Pass --vllm-image "
                "(vllm_image=) with a vLLM that accepts it, or use neither an LMCache tier nor "
                "intelligent routing (kv_cache.mode 'off', routing.strategy "
                "'least_outstanding' or 'random') so the manifest runs the LMI worker")


def vllm_worker(spec: DeploymentSpec, plan: Plan, *, image: str,
                resources: dict[str, Any] | None = None, resolved: Resolved | None = None
                ) -> dict[str, Any]:
    """The ``spec.worker`` block for the vLLM OpenAI server. ``resolved``: the decisions of
    (spec, plan) for the stock image, which the LMI options are rendered for."""
    resolved = resolved_for(spec, plan, "stock", resolved)
    check_model_options(spec, check_image(image), resolved.option_rows)
    env = lmi_environment(spec, plan, resolved=resolved)
    worker: dict[str, Any] = {
        "image": check_image(image),
        "args": vllm_args(spec, plan, resolved),
        "modelInvocationPort": {"containerPort": VLLM_PORT, "name": "http"},
        "modelVolumeMount": {"name": MODEL_VOLUME, "mountPath": MODEL_MOUNT},
        "environmentVariables": [
            {"name": k, "value": v} for k, v in sorted(
                ({k: env[k] for k in VLLM_ENV_KEYS if k in env} | VLLM_TELEMETRY_OFF).items())],
    }
    if resources is not None:
        worker["resources"] = resources
    return worker


def vllm_spec_fields(spec: DeploymentSpec) -> dict[str, Any]:
    """Manifest fields that follow from a vLLM worker: metrics, health check, endpoint."""
    endpoint = COMPLETIONS_ENDPOINT if spec.routing.strategy == "kv_aware" else CHAT_ENDPOINT
    return {
        "invocationEndpoint": endpoint,
        "metrics": {"enabled": spec.observability.detailed_metrics,
                    "modelMetrics": {"path": VLLM_METRICS_PATH, "port": VLLM_PORT}},
        "loadBalancer": {"healthCheckPath": VLLM_HEALTH_PATH},
    }
