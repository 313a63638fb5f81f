"""djl-serving's (LMI's) option rules as data: one frozen row per option lmikit renders.

Each row says how LMI reads a setting, what lmikit may render for it, LMI's default, which
source wins, and the file it was read from. Tests render every example spec (and a spec with
every feature on) and fail when a rendered key is missing here or its value is not accepted
(:func:`check_rendered`). Adding a row: append an :class:`LmiOption` to a ``*_ROWS`` tuple
with the narrowest :class:`Accepts` that fits and a precise ``source``.

How LMI resolves options (deepjavalibrary/djl-serving@master
wlm/src/main/java/ai/djl/serving/wlm/ModelInfo.java ``loadServingProperties``):

- ``option.<key>=value`` lines of ``<model dir>/serving.properties`` load first;
- every environment variable ``OPTION_<KEY>`` is then added with ``putIfAbsent``: the file
  wins. ``<KEY>`` is lower-cased when it is all ``[A-Z_0-9]``; ``OPTION_ENTRYPOINT`` becomes
  ``option.entryPoint`` and ``OPTION_ENGINE`` the top-level ``engine``;
- ``HF_MODEL_ID`` is not an option: ``ModelStore.initialize`` registers a second model from it
  (``createHuggingFaceModel``) next to the model directory's own.

>>> row("max_rolling_batch_size").env_name, row("entryPoint").env_name
('OPTION_MAX_ROLLING_BATCH_SIZE', 'OPTION_ENTRYPOINT')
>>> check_rendered({"option.rolling_batch": "vllm"}, {})
["option.rolling_batch='vllm': must be one of: disable"]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

DJL = "deepjavalibrary/djl-serving@master"
PY = f"{DJL} engines/python/setup/djl_python"
VLLM_PROPS = f"{PY}/properties_manager/vllm_rb_properties.py"
ASYNC = f"{PY}/lmi_vllm/vllm_async_service.py VLLMHandler.initialize"
PASSTHROUGH = (f"{VLLM_PROPS} VllmRbProperties.get_additional_vllm_engine_args (an option "
               "named like a vLLM EngineArgs field becomes that vLLM argument)")
LOAD = f"{DJL} wlm/src/main/java/ai/djl/serving/wlm/ModelInfo.java loadServingProperties"
FILE_WINS = "serving.properties wins over OPTION_<KEY> (putIfAbsent)"
LMCACHE = "LMCache 0.5.6 lmcache/v1/config.py (_CONFIG_DEFINITIONS, _update_config_from_env)"
LMIKIT = "lmikit container/lmikit_runtime"


@dataclass(frozen=True)
class Accepts:
    """What a value must look like. Exactly one kind applies."""

    values: tuple[str, ...] = ()
    int_range: tuple[int, int] | None = None
    float_range: tuple[float, float] | None = None
    pattern: str | None = None
    json_keys: tuple[str, ...] | None = None  # a JSON object with exactly these keys allowed
    json_enums: tuple[tuple[str, tuple[str, ...]], ...] = ()
    never: str = ""  # rendering this key at all is a bug; the text says why

    def problem(self, value: str) -> str | None:  # noqa: PLR0911 - one branch per kind
        if self.never:
            return f"must not be rendered: {self.never}"
        if self.values:
            return None if value in self.values else (
                "must be one of: " + ", ".join(self.values))
        if self.int_range:
            lo, hi = self.int_range
            if not re.fullmatch(r"\d+", value) or not lo <= int(value) <= hi:
                return f"must be a whole number in {lo}..{hi}"
            return None
        if self.float_range:
            lo_f, hi_f = self.float_range
            try:
                number = float(value)
            except ValueError:
                return f"must be a number in {lo_f}..{hi_f}"
            return None if lo_f <= number <= hi_f else f"must be a number in {lo_f}..{hi_f}"
        if self.pattern:
            return None if re.fullmatch(self.pattern, value) else (
                f"must match {self.pattern}")
        if self.json_keys is not None:
            return _json_problem(value, self.json_keys, dict(self.json_enums))
        return None


def _json_problem(value: str, keys: tuple[str, ...],
                  enums: Mapping[str, tuple[str, ...]]) -> str | None:
    try:
        data = json.loads(value)
    except ValueError:
        return "must be a JSON object"
    if not isinstance(data, dict):
        return "must be a JSON object"
    unknown = sorted(set(data) - set(keys))
    if unknown:
        return f"has keys LMI/vLLM does not take: {', '.join(unknown)}"
    for key, allowed in enums.items():
        if key not in data:
            return f"needs key {key!r}"
        if data[key] not in allowed:
            return f"{key} must be one of: {', '.join(allowed)}"
    return None


Form = Literal["option", "property", "env"]


@dataclass(frozen=True)
class LmiOption:
    """One setting: ``key`` as LMI's Python side sees it (``option.<key>``), a top-level
    serving.properties ``property``, or a process ``env`` variable."""

    key: str
    form: Form
    accepts: Accepts
    default: str
    wins: str
    source: str
    note: str = ""

    @property
    def property_name(self) -> str | None:
        """The serving.properties key, or None for an env-only variable."""
        if self.form == "env":
            return None
        return f"option.{self.key}" if self.form == "option" else self.key

    @property
    def env_name(self) -> str:
        """The environment variable LMI reads for it (``OPTION_<KEY>``)."""
        if self.form == "env":
            return self.key
        return f"OPTION_{self.key.upper()}"


def _o(key: str, accepts: Accepts, default: str, source: str, note: str = "",
       wins: str = FILE_WINS) -> LmiOption:
    return LmiOption(key, "option", accepts, default, wins, source, note)


def _e(key: str, accepts: Accepts, default: str, source: str, note: str = "",
       wins: str = "process environment only") -> LmiOption:
    return LmiOption(key, "env", accepts, default, wins, source, note)


BOOL = Accepts(values=("true", "false"))
TRUE = Accepts(values=("true",))
PATH = Accepts(pattern=r"/[^\s]*|[A-Za-z0-9._-][^\s]*")
HUB_OR_S3 = Accepts(pattern=r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?"
                    r"|[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*|/\S+")

# --- the model definition ----------------------------------------------------------------
MODEL_ROWS: tuple[LmiOption, ...] = (
    _o("model_id", HUB_OR_S3, "unset: the model directory itself (Properties.model_id_or_path)",
       f"{LOAD}; {PY}/properties_manager/properties.py set_model_id_or_path; ModelInfo."
       "downloadS3 copies an s3:// model_id with s5cmd and points model_id at the copy",
       "hub id, s3:// prefix or local path"),
    _o("revision", Accepts(pattern=r"[A-Za-z0-9_./-]{1,128}"), "unset (the Hub's main)",
       f"{VLLM_PROPS} generate_vllm_engine_arg_dict ('revision')"),
    _e("HF_MODEL_ID", Accepts(never="it registers a second model beside /opt/ml/model "
                              "(ModelStore.initialize -> createHuggingFaceModel); two "
                              "models break /invocations and a model dir without "
                              "option.model_id fails to load"),
       "unset", f"{DJL} serving/src/main/java/ai/djl/serving/util/ModelStore.java initialize",
       wins="adds a model; does not override option.model_id"),
)

# --- engine and batching -----------------------------------------------------------------
ENGINE_ROWS: tuple[LmiOption, ...] = (
    LmiOption("engine", "property", Accepts(values=("Python",)), "inferred from the files",
              FILE_WINS + " (OPTION_ENGINE is putIfAbsent too)",
              f"{LOAD}; ModelInfo.inferEngine"),
    _o("entryPoint", Accepts(values=("djl_python.lmi_vllm.vllm_async_service",)),
       "model.py if present, else recommended by SERVING_FEATURES and async_mode",
       f"{DJL} engines/python/src/main/java/ai/djl/python/engine/PyModel.java load "
       "(case 'entryPoint'); OPTION_ENTRYPOINT maps to entryPoint in " + LOAD,
       "explicit: a base model.py would otherwise become the entry point"),
    _o("rolling_batch", Accepts(values=("disable",)),
       "auto -> disable + async_mode=true when SERVING_FEATURES has vllm and config.json "
       "names a text-generation architecture",
       f"{DJL} wlm/src/main/java/ai/djl/serving/wlm/LmiConfigRecommender.java setRollingBatch;"
       f" {DJL} engines/python/src/main/java/ai/djl/python/engine/PyProcess.java (any value "
       "but disable also creates a RollingBatch, which predict() prefers)",
       "LMI also takes auto|vllm|trtllm; with async_mode only 'disable' keeps requests on "
       "the async service"),
    _o("async_mode", TRUE, "false unless the recommender sets it (needs config.json)",
       f"{DJL} engines/python/src/main/java/ai/djl/python/engine/PyModel.java load "
       "(case 'async_mode')"),
    _o("max_rolling_batch_size", Accepts(int_range=(1, 4096)),
       "32 (256 only with rolling_batch=vllm)",
       f"{VLLM_PROPS} generate_vllm_engine_arg_dict (-> vLLM max_num_seqs); "
       f"{PY}/properties_manager/properties.py (default 32); LmiConfigRecommender."
       "setRollingBatchSize", "the async path's concurrency limit"),
    _o("tensor_parallel_degree", Accepts(int_range=(1, 64)),
       "all GPUs (TENSOR_PARALLEL_DEGREE=max)",
       f"{VLLM_PROPS} (-> vLLM tensor_parallel_size); LmiConfigRecommender."
       "setTensorParallelDegree"),
    _o("model_loading_timeout", Accepts(int_range=(60, 86_400)),
       "MODEL_LOADING_TIMEOUT (the LMI image sets 1200; 240 when unset)",
       f"{DJL} engines/python/src/main/java/ai/djl/python/engine/PyModel.java load "
       "(case 'model_loading_timeout'); PyEnv.getModelLoadingTimeout; PyProcess.startPythonProcess "
       "waits this long for the Python model load", "seconds"),
)

# --- vLLM engine arguments passed through ------------------------------------------------
VLLM_ROWS: tuple[LmiOption, ...] = (
    _o("max_model_len", Accepts(int_range=(16, 10_485_760)), "the model's context length",
       PASSTHROUGH),
    _o("gpu_memory_utilization", Accepts(float_range=(0.05, 1.0)), "0.9 (vLLM)", PASSTHROUGH),
    _o("enable_prefix_caching", BOOL, "vLLM's default",
       f"{PASSTHROUGH}; construct_vllm_args_list renders true/false as --x/--no-x"),
    _o("kv_cache_dtype", Accepts(values=("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")),
       "auto", f"{PASSTHROUGH}; vllm-project/vllm vllm/config/cache.py CacheDType"),
    _o("kv_transfer_config", Accepts(
        json_keys=("kv_connector", "kv_role"),
        json_enums=(("kv_connector", ("LMCacheConnectorV1",)), ("kv_role", ("kv_both",)))),
       "unset (no KV connector)", PASSTHROUGH),
    _o("speculative_config", Accepts(
        json_keys=("method", "model", "num_speculative_tokens"),
        json_enums=(("method", ("eagle", "eagle3")),)),
       "unset", f"{PASSTHROUGH}; no S3 download (only option.speculative_draft_model gets "
       "one, ModelInfo.downloadDraftModel, and nothing passes that to vLLM)",
       "model must be a hub id or a path inside the container"),
    _o("enable_lora", BOOL, "false",
       f"{VLLM_PROPS} generate_vllm_engine_arg_dict ('enable_lora'); LmiConfigRecommender."
       "setPropertiesForLora (maxWorkers=1)"),
    _o("max_loras", Accepts(int_range=(1, 256)), "4 (DJL; vLLM's is 1)",
       f"{VLLM_PROPS} VllmRbProperties.max_loras"),
    _o("max_lora_rank", Accepts(values=("1", "8", "16", "32", "64", "128", "256", "320",
                                        "512")),
       "16 (vLLM)", f"{PASSTHROUGH}; vllm-project/vllm vllm/config/lora.py MaxLoRARanks"),
    _o("max_cpu_loras", Accepts(int_range=(1, 4096)), "max_loras (vLLM)",
       f"{PASSTHROUGH}; vllm/config/lora.py (must be >= max_loras)"),
)

# --- model-specific vLLM arguments (rendered from lmikit.catalog._model_options) -------------
VLLM23 = "vllm-project/vllm 0.23.0 (the wheel LMI master's lmi-container-requirements.txt pins)"
MODEL_SPECIFIC_ROWS: tuple[LmiOption, ...] = (
    _o("tokenizer_mode", Accepts(values=("auto", "hf", "slow", "mistral", "deepseek_v32",
                                         "deepseek_v4")), "auto",
       f"{PASSTHROUGH}; {VLLM23} vllm/config/model.py TokenizerMode"),
    _o("config_format", Accepts(values=("auto", "hf", "mistral")), "auto",
       f"{PASSTHROUGH}; {VLLM23} vllm/transformers_utils/config.py ConfigFormat"),
    _o("load_format", Accepts(values=(
        "auto", "hf", "bitsandbytes", "dummy", "fastsafetensors", "gguf", "instanttensor",
        "mistral", "modelexpress", "npcache", "pt", "runai_streamer", "runai_streamer_sharded",
        "safetensors", "sharded_state", "tensorizer")), "auto",
       f"{PASSTHROUGH}; {VLLM23} vllm/model_executor/model_loader/__init__.py LoadFormats"),
    _o("limit_mm_per_prompt", Accepts(json_keys=("image", "video", "audio")),
       "999 per modality (vLLM)",
       f"{PASSTHROUGH}; JSON for dict-valued fields ({VLLM23} vllm/engine/arg_utils.py "
       "_compute_kwargs; LMI's tests/test_properties_manager.py passes it as JSON); keys from "
       "vllm/config/multimodal.py"),
    _o("mm_encoder_tp_mode", Accepts(values=("weights", "data")), "weights",
       f"{PASSTHROUGH}; {VLLM23} vllm/config/multimodal.py MMEncoderTPMode"),
)

# --- LMI features --------------------------------------------------------------------------
FEATURE_ROWS: tuple[LmiOption, ...] = (
    _o("lmcache_config_file", PATH, "unset (LMCache reads LMCACHE_* variables)",
       f"{ASYNC} (absolute path as is, else joined to model_dir; missing file raises "
       "FileNotFoundError; exported as LMCACHE_CONFIG_FILE)"),
    _o("lmcache_auto_config", Accepts(values=("false",)), "false",
       f"{PY}/properties_manager/properties.py Properties.lmcache_auto_config; {ASYNC}",
       "lmikit sizes LMCache itself; LMI's sizing counts the whole host"),
    _o("enable_stateful_sessions", TRUE, "true on the async service (a missing option counts "
       "as true)", f"{ASYNC} (SessionManager only when the value is exactly 'true')",
       "never render 'false': VLLMHandler then never sets session_manager and every request "
       "fails in preprocess_request"),
    _o("sessions_expiration", Accepts(int_range=(60, 86_400)), "1200",
       f"{PY}/session_manager.py SessionManager.__init__", "seconds"),
    _o("enable_prompt_tokens_details", Accepts(
        never="LMI builds vLLM's OpenAIServingChat without enable_prompt_tokens_details "
              "(VLLMHandler.initialize), and it is a serving argument, not an EngineArgs "
              "field, so no option reaches it: the stream's usage never carries "
              "prompt_tokens_details.cached_tokens, and lmikit bench predicts each "
              "request's cache outcome instead"),
       "off (vLLM's OpenAIServingChat: enable_prompt_tokens_details=False)",
       f"{ASYNC}; {PASSTHROUGH}; checked on master and the 0.36.0-lmi21..lmi27 branches",
       wins="not read"),
)

# --- process environment -----------------------------------------------------------------
ENV_ROWS: tuple[LmiOption, ...] = (
    _e("PYTHONHASHSEED", Accepts(values=("0",)), "random per process",
       "LMCache 0.5.6 lmcache/v1/token_database.py (pre_caching_hash_algorithm 'builtin' uses "
       "Python's hash()); lmcache/v1/multiprocess/token_hasher.py warns without it",
       "chunk hashes must agree across processes and restarts"),
    _e("SERVING_PROMETHEUS", TRUE, "unset: GET /server/metrics answers 400",
       f"{DJL} prometheus/src/main/java/ai/djl/prometheus/MetricExporter.java export; "
       "PrometheusAppender"),
    _e("LMCACHE_CHUNK_SIZE", Accepts(int_range=(16, 4096)), "256", LMCACHE),
    _e("LMCACHE_LOCAL_CPU", BOOL, "true", LMCACHE),
    _e("LMCACHE_MAX_LOCAL_CPU_SIZE", Accepts(float_range=(0.1, 100_000.0)), "5.0", LMCACHE,
       "GiB per worker"),
    _e("LMCACHE_SAVE_UNFULL_CHUNK", BOOL, "false", LMCACHE),
    _e("LMCACHE_LOCAL_DISK", Accepts(pattern=r"file:///\S*/"), "unset", LMCACHE,
       "three slashes: file://tmp/x would be the relative path tmp/x"),
    _e("LMCACHE_MAX_LOCAL_DISK_SIZE", Accepts(float_range=(0.1, 1_000_000.0)), "0.0",
       LMCACHE),
    _e("LMCACHE_EXTRA_CONFIG", Accepts(json_keys=("use_odirect",)), "unset", LMCACHE),
    _e("LMCACHE_REMOTE_URL", Accepts(pattern=r"(redis|rediss|lm|s3|mooncakestore|infinistore)"
                                             r"://\S+"), "unset", LMCACHE),
    _e("LMCACHE_REMOTE_SERDE", Accepts(values=("naive",)), "naive", LMCACHE),
    _e("LMCACHE_TRACK_USAGE", Accepts(values=("false",)),
       "on: usage messages (remote URL, model name) over plain HTTP to stats.lmcache.ai:8080",
       "LMCache 0.5.6 lmcache/usage_telemetry/identity.py (off only for the exact string "
       "'false'), transport.py, messages.py; 0.3.7-0.4.5 lmcache/usage_context.py",
       "every process that runs LMCache"),
    _e("DO_NOT_TRACK", Accepts(values=("1",)), "unset",
       "LMCache 0.5.6 lmcache/usage_telemetry/identity.py (1, true or yes; from 0.5.2, not in "
       "0.4.5)", "HyperPod's vLLM worker, where the operator may drop LMCACHE_* variables"),
    _e("LMIKIT_PLAN", Accepts(pattern=r"\{.*\}"), "unset: the planned LMCache file is used",
       f"{LMIKIT}/autoconfig.py runtime_plan_from_env", "lmikit's image only"),
    _e("LMIKIT_METRICS_PATH", Accepts(pattern=r"/[A-Za-z0-9/_.-]*"), "unset: no metrics front",
       f"{LMIKIT}/start.py _metrics; front.py", "lmikit's image only"),
    _e("LMIKIT_EMF", Accepts(pattern=r"\{.*\}"), "unset: no EMF emitter",
       f"{LMIKIT}/emf.py parse_config", "lmikit's image only"),
    _e("LMIKIT_HF_TOKEN_SECRET_ARN", Accepts(pattern=r"arn:aws[a-z-]*:secretsmanager:\S+"),
       "unset", f"{LMIKIT}/secrets.py fetch_hf_token", "lmikit's image only"),
    _e("LMIKIT_MODEL_ID", HUB_OR_S3, "unset",
       "lmikit sdk/lmikit/lora/_registry.py (the adapter registry checks an adapter's base model)",
       "read back from the component; no container reads it"),
)

ROWS: tuple[LmiOption, ...] = (MODEL_ROWS + ENGINE_ROWS + VLLM_ROWS + MODEL_SPECIFIC_ROWS
                                + FEATURE_ROWS + ENV_ROWS)


def _index() -> tuple[dict[str, LmiOption], dict[str, LmiOption]]:
    by_property = {r.property_name: r for r in ROWS if r.property_name}
    by_env = {r.env_name: r for r in ROWS}
    return by_property, by_env


def row(key: str) -> LmiOption:
    """The row for an option key, serving.properties key or environment variable."""
    by_property, by_env = _index()
    for candidate in (f"option.{key}", key):
        if candidate in by_property:
            return by_property[candidate]
    if key in by_env:
        return by_env[key]
    raise KeyError(f"no LMI option row for {key!r}")


def env_to_property(name: str) -> str | None:
    """LMI's own mapping of an ``OPTION_*`` variable to its serving.properties key."""
    if not name.startswith("OPTION_"):
        return None
    key = name[len("OPTION_"):]
    if re.fullmatch(r"[A-Z_\d]+", key):
        key = key.lower()
    if key == "entrypoint":
        return "option.entryPoint"
    if key == "engine":
        return "engine"
    return f"option.{key}"


def check_rendered(properties: Mapping[str, str], env: Mapping[str, str]) -> list[str]:
    """Every problem with rendered ``serving.properties`` entries and environment variables:
    unknown keys, values a row does not accept, and options set twice with different values
    (the file would silently win)."""
    by_property, by_env = _index()
    problems: list[str] = []
    for key, value in properties.items():
        option = by_property.get(key)
        if option is None:
            problems.append(f"{key}: not in the LMI option table")
            continue
        why = option.accepts.problem(value)
        if why:
            problems.append(f"{key}={value!r}: {why}")
    for name, value in env.items():
        option = by_env.get(name)
        if option is None:
            problems.append(f"{name}: not in the LMI option table")
            continue
        why = option.accepts.problem(value)
        if why:
            problems.append(f"{name}={value!r}: {why}")
        twin = env_to_property(name)
        if twin and twin in properties and properties[twin] != value:
            problems.append(f"{name}={value!r} and {twin}={properties[twin]!r}: the file wins")
    return problems
