"""The deployment spec: one YAML file that every lmikit target is rendered from.

>>> spec = DeploymentSpec.model_validate({
...     "api_version": "v1", "name": "docqa", "region": "us-east-1",
...     "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.12xlarge"},
... })
>>> spec.kv_cache.mode, spec.routing.strategy
('auto', 'sticky_session')
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from lmikit.catalog import RESERVED_PATHS, reserved_path_problem
from lmikit.spec._credentials import credential_paths

# SageMaker resource names: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$, at most 63 characters. The spec
# name becomes a prefix of longer names (endpoint config, components), so it is shorter.
NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"
NAME_MAX = 40
ADAPTER_NAME_MAX = 20
REGION_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$"
HF_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
S3_URI_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$"
ARN_PATTERN = r"^arn:aws[a-z-]*:"
SECRET_ARN_PATTERN = r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+$"
KMS_ARN_PATTERN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)/.+$"
SNS_ARN_PATTERN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+(\.fifo)?$"
# botocore's ProductionVariantCapacityReservationConfig.MlReservationArn (20..258 characters),
# anchored; a training plan's ARN is arn:aws:sagemaker:<region>:<account>:training-plan/<name>
INSTANCE_TYPE_PATTERN = r"^ml\.[a-z0-9-]+\.[0-9]*x?large$"
RESERVATION_ARN_PATTERN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z0-9\-]{1,14}/.*$"
REVISION_PATTERN = r"^[A-Za-z0-9_./-]+$"
VERSION_PATTERN = r"^\d+\.\d+\.\d+$"
DISK_PATH_PATTERN = r"^/[^\s]*/$"
REMOTE_URL_PATTERN = r"^(redis|rediss|lm|s3|mooncakestore|infinistore)://\S+$"
METRICS_PATH_PATTERN = r"^/[A-Za-z0-9/_.-]+$"
SUBNET_PATTERN = r"^subnet-[0-9a-f]{8,17}$"
SECURITY_GROUP_PATTERN = r"^sg-[0-9a-f]{8,17}$"
# Kubernetes: a Secret's name is a DNS subdomain (apimachinery validation IsDNS1123Subdomain,
# at most 253), a data key [-._a-zA-Z0-9]+ (IsConfigMapKey, at most 253).
K8S_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
K8S_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
DEFAULT_LMI_VERSION = "0.38.0"
DEFAULT_PREFIX_LENGTH = 4096  # bytes; routing.prefix_length when the spec leaves it out
# What each pattern accepts, in words: a spec error says this, never the regular expression.
PATTERN_WORDS = {
    NAME_PATTERN: "letters, digits and hyphens, starting and ending with a letter or digit "
                  "(it names SageMaker resources)",
    REGION_PATTERN: "an AWS region such as us-east-1",
    INSTANCE_TYPE_PATTERN: "a SageMaker instance type such as ml.g6e.2xlarge",
    RESERVATION_ARN_PATTERN: "a training plan ARN, arn:aws:sagemaker:REGION:ACCOUNT:"
                             "training-plan/NAME",
    SECRET_ARN_PATTERN: "a Secrets Manager secret ARN, arn:aws:secretsmanager:REGION:ACCOUNT:"
                        "secret:NAME",
    KMS_ARN_PATTERN: "a KMS key or alias ARN, arn:aws:kms:REGION:ACCOUNT:key/ID or "
                     "arn:aws:kms:REGION:ACCOUNT:alias/NAME",
    SNS_ARN_PATTERN: "an SNS topic ARN, arn:aws:sns:REGION:ACCOUNT:TOPIC",
    REVISION_PATTERN: "a branch, tag or commit: letters, digits and _ . / - (no spaces)",
    VERSION_PATTERN: "a version of three numbers such as 0.38.0",
    DISK_PATH_PATTERN: "an absolute directory that ends in / and has no spaces, such as "
                       "/tmp/lmcache/",
    REMOTE_URL_PATTERN: "a redis://, rediss://, lm://, s3://, mooncakestore:// or "
                        "infinistore:// URL with no spaces, such as redis://host:6379",
    METRICS_PATH_PATTERN: "a path that starts with / and holds letters, digits and / _ . -, "
                          "such as /metrics",
    SUBNET_PATTERN: "a subnet id: subnet- and 8 to 17 hexadecimal digits",
    SECURITY_GROUP_PATTERN: "a security group id: sg- and 8 to 17 hexadecimal digits",
    HF_ID_PATTERN: "a Hugging Face id such as meta-llama/Llama-3.1-8B-Instruct",
    K8S_NAME_PATTERN: "a Kubernetes name: lowercase letters, digits, - and . such as hf-token",
    K8S_KEY_PATTERN: "letters, digits and - _ . such as token",
}
# botocore's sagemaker TagKey / TagValue (and IAM's tag types): [\p{L}\p{Z}\p{N}_.:/=+\-@]*.
# Python's \w is exactly \p{L}, \p{N} and "_"; \p{Z} is the 19 separators listed. AWS
# reserves keys starting aws: ("Tagging AWS resources"); lmikit:<...> keys are lmikit's own.
TAG_TEXT = re.compile(
    r"[\w\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000.:/=+\-@]*")
RESERVED_TAG_PREFIXES = ("aws:", "lmikit:")


def _auto_or_gb(value: Any) -> float | Literal["auto"]:
    if value is None or value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError("must be 'auto' or a size in GB (a number greater than 0)")
    if value <= 0 or value == float("inf"):
        raise ValueError("must be 'auto' or a size in GB (a number greater than 0)")
    return float(value)


AutoSizeGB = Annotated[
    float | Literal["auto"],
    PlainValidator(_auto_or_gb),
    WithJsonSchema({"oneOf": [{"const": "auto"}, {"type": "number", "exclusiveMinimum": 0}]}),
]


def _fail(errors: list[tuple[str, str]]) -> None:
    """Raise one ValueError carrying several (field path, message) problems.

    The loader splits it back into one problem per path, so each points at its own line.
    """
    if errors:
        raise ValueError("\n".join(f"{FIELD_MARK}{path}{FIELD_MARK} {msg}" for path, msg in errors))


FIELD_MARK = "\u00a7"


class _Model(BaseModel):
    # strict: YAML already gives typed values, so no coercion ("2" is not 2, true is not 1),
    # as in the committed JSON Schema's types.
    # hide_input_in_errors: a ValidationError's text never repeats what was given (a URL
    # with a password, for one); lmikit.spec._loader shows values itself, masked.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True,
                              hide_input_in_errors=True)


class K8sSecretKey(_Model):
    """A key of a Kubernetes Secret: the CRD's ``tokenSecretRef`` (a SecretKeySelector)."""

    name: str = Field(pattern=K8S_NAME_PATTERN, max_length=253,
                      description="The Secret's name (a DNS subdomain name).")
    key: str = Field(pattern=K8S_KEY_PATTERN, max_length=253,
                     description="The key in the Secret's data that holds the token.")


class ModelSpec(_Model):
    id: str = Field(
        description="Hugging Face model id (org/name) or an s3:// URI of uncompressed weights.",
        min_length=3, max_length=256,
        json_schema_extra={"pattern": f"({HF_ID_PATTERN})|({S3_URI_PATTERN})"},
    )
    # a branch, tag or commit: letters, digits and ``_ . / -`` (what lmi_options accepts for
    # ``option.revision``); no space, ``=`` or control character, which would end or split
    # the serving.properties line it is written to
    revision: str | None = Field(
        default=None, description="Hugging Face revision (branch, tag or commit) to pin.",
        max_length=128, pattern=REVISION_PATTERN,
    )
    dtype: Literal["auto", "bfloat16", "float16", "fp8"] = Field(
        default="auto",
        description="Weight dtype; auto takes the dtype from the model's config.json.",
    )
    config_path: str | None = Field(
        default=None,
        description="Path to the model's config.json (relative to the spec file). Required for "
        "models not in lmikit's catalog, since planning never reaches the network.",
    )
    hub_id: str | None = Field(
        default=None, pattern=HF_ID_PATTERN, max_length=256,
        description="With an s3:// model.id: the Hugging Face id of the weights staged there "
        "(`lmikit weights stage HUB_ID s3://...`). lmikit then plans, adds model-specific "
        "options and checks versions as for that catalog model; no token is needed at start.",
    )
    hf_token_k8s_secret: K8sSecretKey | None = Field(
        default=None,
        description="HyperPod: the Kubernetes Secret (name, key) in the manifest's namespace "
        "that holds a Hugging Face token for a gated model.id, rendered as the operator's "
        "huggingFaceModel.tokenSecretRef. SageMaker targets use "
        "security.hf_token_secret_arn instead.",
    )

    @model_validator(mode="after")
    def _id_shape(self) -> ModelSpec:
        if not (re.match(HF_ID_PATTERN, self.id) or re.match(S3_URI_PATTERN, self.id)):
            _fail([("model.id", "must be a Hugging Face id like 'Qwen/Qwen2.5-7B-Instruct' or "
                    "an s3://bucket/prefix URI")])
        errors: list[tuple[str, str]] = []
        if self.hub_id and not self.is_s3:
            errors.append(("model.hub_id", "names the Hub model of weights staged in S3; with "
                           "a Hugging Face model.id remove it (model.id already names the model)"))
        if self.hf_token_k8s_secret and self.is_s3:
            errors.append(("model.hf_token_k8s_secret", "the weights come from S3, so no Hub "
                           "token is needed: remove it"))
        _fail(errors)
        return self

    @property
    def is_s3(self) -> bool:
        return self.id.startswith("s3://")

    @property
    def catalog_id(self) -> str:
        """The id lmikit looks the model up by: ``hub_id`` for staged weights, else ``id``."""
        return self.hub_id or self.id


class InstanceSpec(_Model):
    type: str = Field(description="SageMaker instance type, e.g. ml.g6e.12xlarge.",
                      pattern=INSTANCE_TYPE_PATTERN)
    min_count: int = Field(default=1, ge=0, le=100,
                           description="Minimum instances; 0 lets the endpoint scale to zero.")
    max_count: int = Field(default=1, ge=1, le=100, description="Maximum instances.")
    copies_per_instance: int = Field(
        default=1, ge=1, le=8, description="Model copies (inference component copies) that "
        "share one instance; they share its host RAM and NVMe. Stateful sessions need 1 "
        "(SageMaker pins a session to an instance, LMI keeps it in one copy).")
    capacity_reservation_arn: str | None = Field(
        default=None, pattern=RESERVATION_ARN_PATTERN, min_length=20, max_length=258,
        description="SageMaker endpoints: the ARN of a training plan reserved for endpoints "
        "(arn:aws:sagemaker:<region>:<account>:training-plan/<name>), of instance.type (plans "
        "reserve ml.p4d, p4de, p5, p5e, p5en and p6 types only), in the spec's region. The "
        "endpoint's instances then run only in that reserved capacity "
        "(CapacityReservationPreference capacity-reservations-only); needed for a type with no "
        "on-demand hosting in the region. HyperPod ignores it: its nodes are the cluster's.")

    @model_validator(mode="after")
    def _counts(self) -> InstanceSpec:
        if self.min_count > self.max_count:
            _fail([("instance.min_count", f"must not exceed instance.max_count "
                    f"({self.max_count})")])
        return self


class SpeculativeSpec(_Model):
    method: Literal["eagle", "eagle3"] = Field(description="Speculative decoding method.")
    draft_model: str = Field(description="Hugging Face id or s3:// URI of the EAGLE draft head.",
                             min_length=3, max_length=256)
    num_speculative_tokens: int = Field(default=4, ge=1, le=16,
                                        description="Tokens proposed per step.")


class LoraSpec(_Model):
    enabled: bool | None = Field(default=None, description="Serve LoRA adapters; default on when "
                                 "adapters are listed. Turn on to register adapters later with "
                                 "`lmikit adapters register`.")
    max_rank: int | None = Field(default=None, ge=1, le=512, description="Largest adapter rank "
                                 "the endpoint accepts; default the largest listed rank, at "
                                 "least 16.")
    max_adapters: int | None = Field(default=None, ge=1, le=256, description="Adapters held on "
                                     "the GPU at once (OPTION_MAX_LORAS); default max(4, listed).")


class EngineSpec(_Model):
    lmi_version: str = Field(default=DEFAULT_LMI_VERSION, pattern=VERSION_PATTERN,
                             description="LMI (djl-inference) container version to pin; "
                             "versions older than a feature in the spec needs are refused.")
    tensor_parallel_degree: int = Field(default=1, ge=1, le=8,
                                        description="GPUs per model copy.")
    max_model_len: int | None = Field(default=None, ge=256, le=2_097_152,
                                      description="Longest sequence served; default: the "
                                      "model's limit capped at 90% of the planned GPU KV pool.")
    gpu_memory_utilization: float = Field(default=0.9, gt=0.1, le=0.98,
                                          description="Share of GPU memory vLLM may use.")
    max_batch_size: int = Field(default=64, ge=1, le=1024,
                                description="Maximum concurrent sequences (rolling batch).")
    kv_cache_dtype: Literal["auto", "fp8"] = Field(
        default="auto", description="KV cache dtype; auto follows the model's activation dtype.")
    enable_prefix_caching: bool = Field(default=True,
                                        description="vLLM's GPU prefix cache (the first tier).")
    speculative: SpeculativeSpec | None = Field(default=None,
                                                description="EAGLE speculative decoding.")
    lora: LoraSpec = Field(default_factory=LoraSpec, description="LoRA adapter serving limits.")


KvMode = Literal["auto", "off", "cpu", "cpu+disk", "remote"]


class KvCacheSpec(_Model):
    mode: KvMode = Field(default="auto", description="Which LMCache tiers to use; auto lets the "
                         "planner decide from the workload and the instance.")
    chunk_size: int = Field(default=256, ge=16, le=4096, multiple_of=16,
                            description="Tokens per LMCache chunk.")
    cpu_size_gb: AutoSizeGB = Field(default="auto", description="LMCache CPU RAM per worker (GB) "
                                    "or auto to size from the instance.")
    disk_size_gb: AutoSizeGB = Field(default="auto", description="LMCache NVMe size per worker "
                                     "(GB) or auto.")
    disk_path: str = Field(default="/tmp/lmcache/", pattern=DISK_PATH_PATTERN,
                           description="Absolute directory on the instance's NVMe (trailing /).")
    remote_url: str | None = Field(default=None, max_length=512,
                                   pattern=REMOTE_URL_PATTERN,
                                   description="Remote tier URL, e.g. redis://host:6379 or "
                                   "s3://BUCKET.s3.REGION.amazonaws.com (the bucket's endpoint;"
                                   " the execution role gets read and write on it); never with "
                                   "credentials (see remote_credentials_secret_arn).")
    remote_credentials_secret_arn: str | None = Field(
        default=None, pattern=SECRET_ARN_PATTERN,
        description="Secrets Manager secret with the user name and password of a redis:// or "
        "rediss:// remote_url (JSON {\"username\": ..., \"password\": ...}, or the password "
        "alone). lmikit's image reads it at start with the execution role and gives it to "
        "LMCache only; it is never rendered into any file, template or manifest.")
    in_memory_only: bool = Field(default=False, description="Regulated data: keep KV only in "
                                 "GPU and CPU memory; forbids any disk or remote tier.")

    @model_validator(mode="after")
    def _tiers(self) -> KvCacheSpec:
        errors: list[tuple[str, str]] = []
        if self.in_memory_only:
            if self.mode in ("cpu+disk", "remote"):
                errors.append(("kv_cache.mode", f"{self.mode!r} writes KV outside memory, which "
                               "kv_cache.in_memory_only forbids; use 'cpu', 'off' or 'auto'"))
            if self.disk_size_gb != "auto":
                errors.append(("kv_cache.disk_size_gb", "kv_cache.in_memory_only forbids a disk "
                               "tier; remove this field"))
            if self.remote_url:
                errors.append(("kv_cache.remote_url", "kv_cache.in_memory_only forbids a remote "
                               "tier; remove this field"))
        if self.mode == "remote" and not self.remote_url:
            errors.append(("kv_cache.remote_url", "mode 'remote' needs a remote URL, "
                           "e.g. redis://host:6379"))
        if self.remote_url:
            errors += remote_url_problems(self.remote_url)
        if self.remote_url and self.mode not in ("remote", "auto") and not self.in_memory_only:
            errors.append(("kv_cache.mode", f"{self.mode!r} ignores kv_cache.remote_url; use "
                           "'remote' or 'auto'"))
        errors += self._credentials_problems()
        if self.mode == "off":
            errors += [(f"kv_cache.{k}", "mode 'off' takes no cache sizes; remove this field")
                       for k in ("cpu_size_gb", "disk_size_gb") if getattr(self, k) != "auto"]
        if self.mode == "cpu" and self.disk_size_gb != "auto":
            errors.append(("kv_cache.disk_size_gb", "mode 'cpu' has no disk tier; use mode "
                           "'cpu+disk' or remove this field"))
        _fail(errors)
        return self

    def _credentials_problems(self) -> list[tuple[str, str]]:
        field = "kv_cache.remote_credentials_secret_arn"
        if not self.remote_credentials_secret_arn:
            return []
        if not self.remote_url:
            return [(field, "names credentials for kv_cache.remote_url, which is not set; set "
                     "remote_url or remove this field")]
        scheme = self.remote_url.split("://", 1)[0]
        if scheme not in REMOTE_SCHEMES_WITH_CREDENTIALS:
            why = REMOTE_SCHEMES_WITHOUT_CREDENTIALS.get(scheme, "it takes no credentials")
            return [(field, f"LMCache's {scheme}:// remote connector takes no credentials "
                     f"({why}); remove this field")]
        return []


# Remote schemes whose LMCache 0.5.6 connector takes a user name and password (in the URL's
# user info: RedisConnectorAdapter passes the URL to redis.ConnectionPool.from_url), and why
# the others take none (lmcache/v1/storage_backend/connector/*_adapter.py).
REMOTE_SCHEMES_WITH_CREDENTIALS = ("redis", "rediss")
REMOTE_SCHEMES_WITHOUT_CREDENTIALS = {
    "s3": "it signs with the execution role's AWS credentials; grant the role access to the "
          "bucket instead",
    "lm": "LMCServerConnector is given only the URL's host and port",
    "infinistore": "InfinistoreConnector is given only the URL's host, port and device",
}


# LMCache 0.5.6's S3 connector sends every request to the URL's host (S3Connector strips
# "s3://" and uses the rest as the endpoint and Host header) and asserts that
# extra_config.s3_region is set (s3_adapter.py): the URL must be the bucket's
# virtual-hosted endpoint, whose region lmikit renders as s3_region.
S3_REMOTE_RE = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9-]{1,61}[a-z0-9])\.s3\."
                          r"(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?")


def s3_remote_bucket_region(url: str) -> tuple[str, str] | None:
    """``(bucket, region)`` of an ``s3://`` remote tier URL in the form LMCache's S3
    connector reaches; None for any other URL.

    >>> s3_remote_bucket_region("s3://kv-cache.s3.us-west-2.amazonaws.com")
    ('kv-cache', 'us-west-2')
    >>> s3_remote_bucket_region("s3://kv-cache") is None
    True
    """
    m = S3_REMOTE_RE.fullmatch(url)
    return (m["bucket"], m["region"]) if m else None


def remote_url_problems(url: str) -> list[tuple[str, str]]:
    """A remote tier URL the LMCache connector for its scheme cannot start with."""
    field = "kv_cache.remote_url"
    scheme = url.split("://", 1)[0]
    if scheme == "s3" and s3_remote_bucket_region(url) is None:
        return [(field, "LMCache's S3 connector sends requests to the URL's host and needs "
                 "the bucket's region: give the bucket's endpoint, "
                 "s3://BUCKET.s3.REGION.amazonaws.com (no path; a general-purpose bucket)")]
    if scheme == "mooncakestore":
        return [(field, "LMCache's Mooncake connector reads its servers from "
                 "MOONCAKE_CONFIG_PATH or extra_config, neither of which lmikit renders; use "
                 "redis://, rediss://, lm://, s3:// or infinistore://")]
    return []


class WorkloadSpec(_Model):
    reused_context_tokens: int = Field(
        default=0, ge=0, le=10_000_000_000,
        description="Working set: tokens of repeated context one model copy should keep hot "
        "(documents, system prompts, conversation histories).")
    typical_request_tokens: int = Field(default=10_000, ge=1, le=2_097_152,
                                        description="Prompt length of a typical request.")
    unique_suffix_tokens: int = Field(
        default=100, ge=0, le=2_097_152,
        description="Tokens at the end of a typical request that are new (the question).")
    output_tokens: int = Field(default=100, ge=1, le=1_000_000,
                               description="Tokens generated per request.")
    concurrency: int = Field(default=4, ge=1, le=4096,
                             description="Requests in flight per model copy.")

    @model_validator(mode="after")
    def _suffix(self) -> WorkloadSpec:
        if self.unique_suffix_tokens > self.typical_request_tokens:
            _fail([("workload.unique_suffix_tokens", "cannot exceed "
                    f"workload.typical_request_tokens ({self.typical_request_tokens})")])
        return self


RoutingStrategy = Literal["sticky_session", "prefix_aware", "kv_aware", "least_outstanding",
                          "random"]


class RoutingSpec(_Model):
    strategy: RoutingStrategy = Field(
        default="sticky_session",
        description="sticky_session (SageMaker sessions pin a conversation to one instance), "
        "prefix_aware, kv_aware (HyperPod only: SageMaker's KV_AWARE needs a supported container, "
        "not LMI), least_outstanding or random.")
    prefix_length: int | None = Field(default=None, ge=1024, le=65536,
                                      description="prefix_aware: bytes of body hashed; "
                                      "unset, 4,096.")
    concurrency_threshold: int | None = Field(default=None, ge=1, le=1024,
                                              description="prefix_aware: requests per copy "
                                              "before spilling to another copy; unset, twice "
                                              "`workload.concurrency` (at most 1,024).")

    @model_validator(mode="after")
    def _prefix(self) -> RoutingSpec:
        if self.strategy != "prefix_aware":
            _fail([(f"routing.{key}", "applies only to routing.strategy 'prefix_aware' "
                    f"(strategy is {self.strategy!r})")
                   for key in ("prefix_length", "concurrency_threshold")
                   if getattr(self, key) is not None])
        return self


class SessionsSpec(_Model):
    enabled: bool | None = Field(default=None, description="LMI stateful sessions; default on "
                                 "with sticky_session routing.")
    expiration_seconds: int = Field(default=1200, ge=60, le=86_400,
                                    description="Idle session lifetime.")


class AdapterSpec(_Model):
    name: str = Field(pattern=NAME_PATTERN, max_length=ADAPTER_NAME_MAX,
                      description="Adapter name, used in the component name and requests.")
    source: str = Field(min_length=1, max_length=1024,
                        description="Local adapter directory inside the spec's folder "
                        "(relative to the spec; a symlink there may lead elsewhere) or s3:// URI "
                        "of a .tar.gz.")
    formatter: str | None = Field(default=None, description="Python file with this adapter's "
                                  "input/output formatters (relative to the spec).")
    rank: int | None = Field(default=None, ge=1, le=512,
                             description="LoRA rank; read from adapter_config.json if omitted.")


class FormattersSpec(_Model):
    input: str | None = Field(default=None, description="Python file with the base model's "
                              "input formatter.")
    output: str | None = Field(default=None, description="Python file with the base model's "
                               "output formatter.")


class AlarmsSpec(_Model):
    enabled: bool = Field(default=True, description="Create the default alarms.")
    error_5xx_rate_percent: float = Field(default=1.0, gt=0, le=100,
                                          description="5xx share of invocations that alarms.")
    model_error_rate_percent: float = Field(
        default=50.0, gt=0, le=100,
        description="Share of invocations the model container answered with an error "
        "(InvocationModelErrors: any non-2xx, such as the 424 LMI returns for a failed "
        "request) that alarms; high, so that ordinary client errors do not.")
    p90_model_latency_ms: float | None = Field(default=None, gt=0,
                                               description="p90 ModelLatency limit; default "
                                               "from the plan's predicted miss TTFT.")
    min_hit_rate: float = Field(default=0.2, ge=0, le=1,
                                description="Share of prompt tokens served from any cache tier "
                                "(GPU prefix cache or LMCache) below which the cache "
                                "collapsed.")
    sns_topic_arn: str | None = Field(default=None, pattern=SNS_ARN_PATTERN,
                                      description="SNS topic notified by the alarms.")


RESERVED_METRICS_PATHS = RESERVED_PATHS  # the paths djl-serving or SageMaker answer


class ObservabilitySpec(_Model):
    detailed_metrics: bool = Field(default=True, description="Endpoint detailed observability: "
                                   "scrape the container's Prometheus metrics.")
    metric_publish_frequency_seconds: Literal[10, 30, 60, 120, 180, 240, 300] = Field(
        default=60, description="How often SageMaker publishes the scraped metrics.")
    # SageMaker's MetricsEndpointPath (botocore): /(?!.*\.\.)[a-zA-Z0-9/_.\-]+, at most 256
    metrics_path: str = Field(default="/metrics", pattern=METRICS_PATH_PATTERN, max_length=256,
                              description="Path lmikit's image serves vLLM/LMCache Prometheus "
                              "metrics at (the stock image serves only DJL's /server/metrics); "
                              "never a path djl-serving answers (/ping, /invocations, ...).")
    dashboard: bool = Field(default=True, description="Create the CloudWatch dashboard.")
    client_ttft_metrics: bool = Field(default=False, description="Runtime client publishes "
                                      "TTFT and tokens/s as custom metrics.")
    alarms: AlarmsSpec = Field(default_factory=AlarmsSpec, description="Default alarms.")

    @model_validator(mode="after")
    def _metrics_path(self) -> ObservabilitySpec:
        if ".." in self.metrics_path:
            _fail([("observability.metrics_path", "must not contain '..' (SageMaker's "
                    "MetricsEndpointPath refuses it)")])
        problem = reserved_path_problem(self.metrics_path)
        if problem:
            _fail([("observability.metrics_path", problem)])
        return self


class VpcSpec(_Model):
    subnet_ids: list[Annotated[str, Field(pattern=SUBNET_PATTERN)]] = Field(
        min_length=1, max_length=16, description="Private subnets for the endpoint.")
    security_group_ids: list[Annotated[str, Field(pattern=SECURITY_GROUP_PATTERN)]] = Field(
        min_length=1, max_length=5, description="Security groups for the endpoint.")


class SecuritySpec(_Model):
    kms_key_arn: str | None = Field(default=None, pattern=KMS_ARN_PATTERN,
                                    description="KMS key for artifacts (and the volume where "
                                    "the instance type allows it).")
    vpc: VpcSpec | None = Field(default=None, description="Run the endpoint inside a VPC.")
    network_isolation: bool = Field(default=False, description="No outbound network from the "
                                    "container; needs s3:// weights, which SageMaker copies "
                                    "into /opt/ml/model (no Hub download).")
    kms_volume_encryption: Literal["auto", "required", "off"] = Field(
        default="auto", description="Use kms_key_arn for the instance volume: auto where the "
        "instance type allows it (not on types with local NVMe, whose instance store is "
        "hardware-encrypted), required to fail where it cannot, or off.")
    hf_token_secret_arn: str | None = Field(default=None, pattern=SECRET_ARN_PATTERN,
                                            description="Secrets Manager secret holding the "
                                            "Hugging Face token; never a plaintext token.")


class DeploymentSpec(_Model):
    """The whole deployment. Load one with :func:`lmikit.load_spec`."""

    api_version: Literal["v1"] = Field(description="Spec format version.")
    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX,
                      description="Deployment name; prefixes every resource name.")
    region: str = Field(pattern=REGION_PATTERN, description="AWS region, e.g. us-east-1: "
                        "one that botocore's partition data lists.")
    model: ModelSpec = Field(description="The model to serve.")
    instance: InstanceSpec = Field(description="Instance type and counts.")
    engine: EngineSpec = Field(default_factory=EngineSpec, description="vLLM/LMI engine.")
    kv_cache: KvCacheSpec = Field(default_factory=KvCacheSpec, description="LMCache tiers.")
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec,
                                   description="Workload hints for the planner.")
    routing: RoutingSpec = Field(default_factory=RoutingSpec, description="Request routing.")
    sessions: SessionsSpec = Field(default_factory=SessionsSpec,
                                   description="Stateful (sticky) sessions.")
    adapters: list[AdapterSpec] = Field(default_factory=list, max_length=64,
                                        description="LoRA adapters, one inference component each.")
    formatters: FormattersSpec = Field(default_factory=FormattersSpec,
                                       description="Base model input/output formatters.")
    observability: ObservabilitySpec = Field(default_factory=ObservabilitySpec,
                                             description="Metrics, dashboards and alarms.")
    security: SecuritySpec = Field(default_factory=SecuritySpec,
                                   description="Encryption, network and secrets.")
    tags: dict[Annotated[str, Field(min_length=1, max_length=128)],
               Annotated[str, Field(max_length=256)]] = Field(
        default_factory=dict, max_length=40,
        description="Tags on every resource: keys and values of letters, digits, spaces and "
        "_ . : / = + - @ (as SageMaker and IAM accept); keys starting aws: or lmikit: are "
        "reserved.")

    @model_validator(mode="before")
    @classmethod
    def _no_credentials_in_urls(cls, data: Any) -> Any:
        """Refuse a URL with credentials in any field, before anything else: every spec string
        is published somewhere (environment, template, artifact, manifest, tags)."""
        _fail([(".".join(map(str, path)), _credentials_message(path, what))
               for path, what in credential_paths(data)])
        return data

    @field_validator("region")
    @classmethod
    def _known_region(cls, region: str) -> str:
        from lmikit.catalog import region_problem

        problem = region_problem(region)
        if problem:
            raise ValueError(problem)
        return region

    @model_validator(mode="after")
    def _tags_aws_accepts(self) -> DeploymentSpec:
        """Tags reach every SageMaker and IAM resource: refuse what those services refuse,
        and keys lmikit's ownership tags use, before anything is created."""
        errors: list[tuple[str, str]] = []
        for key, value in self.tags.items():
            # the key names the field unless it cannot be a path (a dot, or text AWS refuses)
            path = f"tags.{key}" if TAG_TEXT.fullmatch(key) and "." not in key else "tags"
            reserved = next((p for p in RESERVED_TAG_PREFIXES if key.lower().startswith(p)),
                            None)
            if reserved:
                who = "AWS" if reserved == "aws:" else \
                    "lmikit's own tags (lmikit:deployment, lmikit:managed-by, ...)"
                errors.append((path, f"the {reserved} prefix is reserved for {who}; choose "
                               "another key"))
            for what, text in (("key", key), ("value", value)):
                bad = sorted({c for c in text if not TAG_TEXT.fullmatch(c)})
                if bad:  # ascii(): what AWS refuses may be a line break or a field mark
                    errors.append((path, f"the tag {what} {ascii(text)} has "
                                   f"{', '.join(map(ascii, bad))}: AWS tags take letters, "
                                   "digits, spaces and _ . : / = + - @ only"))
        _fail(errors)
        return self

    @model_validator(mode="after")
    def _cross_fields(self) -> DeploymentSpec:
        errors: list[tuple[str, str]] = []
        if self.routing.strategy == "sticky_session" and self.sessions.enabled is False:
            errors.append(("sessions.enabled", "routing.strategy 'sticky_session' needs sessions; "
                           "remove 'enabled: false' or choose another routing.strategy"))
        seen: set[str] = set()
        for i, adapter in enumerate(self.adapters):
            if adapter.name in seen:
                errors.append((f"adapters.{i}.name", f"{adapter.name!r} is used twice; adapter "
                               "names must be unique"))
            seen.add(adapter.name)
        if self.security.network_isolation and not self.model.is_s3:
            errors.append(("security.network_isolation", "blocks the Hugging Face download; set "
                           "model.id to an s3:// URI of the weights"))
        errors += self._isolation_problems()
        lora = self.engine.lora
        if lora.enabled is False and self.adapters:
            errors.append(("engine.lora.enabled", "is false but adapters are listed; remove "
                           "the adapters or enable LoRA"))
        if lora.max_rank is not None:
            for i, adapter in enumerate(self.adapters):
                if adapter.rank and adapter.rank > lora.max_rank:
                    errors.append((f"adapters.{i}.rank", f"{adapter.rank} exceeds "
                                   f"engine.lora.max_rank ({lora.max_rank})"))
        errors += self._reservation_problems()
        if self.engine.speculative and self.engine.speculative.draft_model == self.model.id:
            errors.append(("engine.speculative.draft_model", "must be a draft head, not the "
                           "served model.id"))
        _fail(errors)
        return self

    def _reservation_problems(self) -> list[tuple[str, str]]:
        """A training plan is regional and reserves only some types (botocore's enum)."""
        from lmikit.catalog import TRAINING_PLAN_TYPES

        arn = self.instance.capacity_reservation_arn
        if not arn:
            return []
        field = "instance.capacity_reservation_arn"
        arn_region = arn.split(":")[3]
        if arn_region != self.region:
            return [(field, f"is in region {arn_region or '(none)'} but the spec deploys to "
                     f"{self.region}; a training plan reserves capacity in its own region: "
                     f"give one in {self.region}")]
        if arn.split(":")[5].startswith("training-plan/") and \
                self.instance.type not in TRAINING_PLAN_TYPES:
            return [(field, f"names a training plan, but training plans reserve only "
                     f"{', '.join(sorted(TRAINING_PLAN_TYPES))}, not instance.type "
                     f"{self.instance.type}: remove it or choose one of those types")]
        return []

    def _isolation_problems(self) -> list[tuple[str, str]]:
        """What cannot work when the container has no network (EnableNetworkIsolation: no
        Hub, no S3, no AWS API) and SageMaker copies the S3 weights into /opt/ml/model, or
        with a draft model LMI does not download."""
        errors: list[tuple[str, str]] = []
        sp = self.engine.speculative
        draft = sp.draft_model if sp else ""
        if not self.security.network_isolation:
            if draft.startswith("s3://"):
                errors.append(("engine.speculative.draft_model", "LMI does not download a draft "
                               "named in speculative_config from S3; use a Hugging Face id, or "
                               "put the draft under model.id's S3 prefix and turn on "
                               "security.network_isolation (SageMaker then copies both)"))
            return errors
        why = "security.network_isolation leaves the container without network"
        if self.security.hf_token_secret_arn:
            errors.append(("security.hf_token_secret_arn", f"{why} (no Secrets Manager); the "
                           "weights come from S3, so remove this field"))
        if self.kv_cache.remote_url:
            errors.append(("kv_cache.remote_url", f"{why}: a remote KV tier is unreachable; "
                           "remove it"))
        if self.kv_cache.remote_credentials_secret_arn:
            errors.append(("kv_cache.remote_credentials_secret_arn", f"{why} (no Secrets "
                           "Manager); remove this field"))
        for key in ("input", "output"):
            if getattr(self.formatters, key):
                errors.append((f"formatters.{key}", "with security.network_isolation SageMaker "
                               "copies the S3 weights into /opt/ml/model, where lmikit cannot add "
                               "model.py; put model.py under model.id's prefix yourself and "
                               "remove this field, or use adapter formatters"))
        if draft and self.model.is_s3:
            prefix = self.model.id.rstrip("/") + "/"
            if not draft.startswith("s3://"):
                errors.append(("engine.speculative.draft_model", f"{why}: a Hugging Face draft "
                               f"cannot be downloaded; put it under {prefix} and name its "
                               "s3:// prefix"))
            elif not draft.startswith(prefix) or not draft[len(prefix):].strip("/"):
                errors.append(("engine.speculative.draft_model", f"must lie under model.id's "
                               f"prefix {prefix} (SageMaker copies only that prefix into "
                               "/opt/ml/model)"))
        return errors

    @property
    def lora_enabled(self) -> bool:
        return bool(self.adapters) if self.engine.lora.enabled is None else self.engine.lora.enabled

    @property
    def sessions_enabled(self) -> bool:
        if self.sessions.enabled is None:
            return self.routing.strategy == "sticky_session"
        return self.sessions.enabled

    @property
    def prefix_aware_settings(self) -> tuple[int, int]:
        """(PrefixLength, ConcurrencyThreshold) that a ``prefix_aware`` endpoint gets: the
        spec's, else 4,096 bytes and twice the workload's concurrency (at most the API's
        1,024). The simulator routes a spec's copies with the same two."""
        r = self.routing
        return (r.prefix_length or DEFAULT_PREFIX_LENGTH,
                r.concurrency_threshold or min(1024, max(1, 2 * self.workload.concurrency)))


PUBLISHED = ("the container environment, the CloudFormation template, the model artifact, "
             "the HyperPod manifest or resource tags")
# Fields that take an s3:// URI (adapters.<i>.source too).
S3_URI_FIELDS = (("model", "id"), ("engine", "speculative", "draft_model"))


def _credentials_message(path: tuple[str | int, ...], what: str) -> str:
    """What to do instead of a URL with credentials at ``path`` (never the value itself)."""
    dotted = ".".join(map(str, path))
    head = (f"the URL carries credentials ({what}); spec values are published ({PUBLISHED}), "
            "so credentials never belong in one")
    if dotted == "kv_cache.remote_url":
        return (f"{head}. Remove them from the URL and put them in a Secrets Manager secret "
                "named by kv_cache.remote_credentials_secret_arn: lmikit's image reads it at "
                "start with the execution role and hands it to LMCache only")
    if path in S3_URI_FIELDS or (path[:1] == ("adapters",) and path[2:] == ("source",)):
        return (f"{head}. S3 is read with the execution role's permissions, never with "
                "credentials in a URL: remove them and grant the role read access instead")
    return (f"{head}. Remove them; lmikit takes secrets only from Secrets Manager "
            "(security.hf_token_secret_arn, kv_cache.remote_credentials_secret_arn)")
