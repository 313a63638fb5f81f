"""Container start-up: where the weights come from, how long starting takes, what fits the disk.

Pure arithmetic (standard library only), used by the planner (``plan.startup``,
``plan.volume``) and by the SageMaker renderer (start-up timeouts, ``VolumeSizeInGB``).

Where the weights come from (:func:`weights_source`):

- ``hub``: ``option.model_id`` is a Hugging Face id; vLLM downloads the weights inside LMI's
  Python start-up (djl-serving ``vllm_async_service.py`` ``VLLMHandler.initialize`` builds the
  engine from ``model_id``), so the download counts against the model-loading timeout and
  SageMaker's container health check;
- ``s3``: ``option.model_id`` is an ``s3://`` prefix; djl-serving's Java front end copies it with
  s5cmd before the Python start-up (``ModelInfo.downloadS3``), inside the health check only;
- ``s3-sagemaker``: SageMaker copies the weights into ``/opt/ml/model`` before the container
  starts (a SageMaker Model's ``ModelDataSource``; used with network isolation), counted
  against ``ModelDataDownloadTimeoutInSeconds``.

Planning rates (assumptions, each shown in every plan):

- Hub download 100 MB/s. The LMI image sets ``HF_HUB_ENABLE_HF_TRANSFER=1`` (djl-serving
  ``serving/docker/lmi.Dockerfile``); hf_transfer's own README calls itself a tool to go beyond
  ~500 MB/s on very high-bandwidth networks. One fifth of that ceiling is a rate most regions
  and instance sizes sustain; a faster network only shortens the start.
- S3 download 250 MB/s: S3 serves parallel ranged GETs (AWS whitepaper "Best Practices Design
  Patterns: Optimizing Amazon S3 Performance", byte-range fetches); s5cmd and SageMaker's own
  copy run many at once. Half a 4 Gbit/s flow, below the network of every GPU instance here.
- Load 500 MB/s from local disk into GPU memory (safetensors read + copy). A gp2 EBS volume
  tops out at 250 MB/s, instance NVMe at GB/s; weights just downloaded are usually still in
  the page cache.
- Warm-up 300 s: vLLM's CUDA-graph capture and compilation, LMCache set-up, first health check.
- A 1.5x margin on the sum before it becomes a timeout; timeouts are rounded up to whole
  minutes, never below 600 s (SageMaker's usual default) and never above 3600 s, the API
  maximum of both ``ContainerStartupHealthCheckTimeoutInSeconds`` and
  ``ModelDataDownloadTimeoutInSeconds`` (botocore's SageMaker model: min 60, max 3600).

>>> e = estimate_startup(145_408_131_072, "hub")
>>> e.health_check_timeout_s, e.capped
(3120, False)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from lmikit import sizing

if TYPE_CHECKING:
    from lmikit.spec import DeploymentSpec

WeightsSource = Literal["hub", "s3", "s3-sagemaker"]

HUB_DOWNLOAD_BYTES_PER_S = 100e6
S3_DOWNLOAD_BYTES_PER_S = 250e6
LOAD_BYTES_PER_S = 500e6
WARMUP_S = 300.0
# Pinning LMCache's CPU tier. Every LMCache an LMI release ships (lmikit.lmi_versions
# LMCACHE_SHIPPED) allocates the whole max_local_cpu_size at engine start as pinned host
# memory, one cudaHostAlloc per worker (LMCache >= 0.3.13 local_cpu_backend.py ignores
# enable_lazy_memory_allocator; LMCache PR #2951). Third-party measurements of one
# cudaHostAlloc, none on SageMaker: 20 GB in 17.4 s on a 48-core host (novitalabs/pegaflow PR
# #277, ~1.15 GB/s); 16 GiB in 7.9 s on EC2 g6.4xlarge (NVIDIA/cudf PR #23457, ~2.2 GB/s).
# The slower is used, for the largest worker: a copy's workers pin at once, each in its own
# process (whether they slow each other down: not found).
PIN_BYTES_PER_S = 1.15e9
MARGIN = 1.5
TIMEOUT_FLOOR_S = 600
API_TIMEOUT_MIN_S = 60  # botocore: ProductionVariant*TimeoutInSeconds min
API_TIMEOUT_MAX_S = 3600  # botocore: ProductionVariant*TimeoutInSeconds max
# The LMI image sets ENV MODEL_LOADING_TIMEOUT=1200 (djl-serving serving/docker/lmi.Dockerfile);
# PyEnv.getModelLoadingTimeout falls back to 240 s when it is unset.
LMI_IMAGE_MODEL_LOADING_TIMEOUT_S = 1200

# The ML storage volume: instance NVMe where the instance has it, else an EBS gp2 volume of
# ``VolumeSizeInGB`` (botocore ProductionVariant: 1..512, "only Amazon EBS gp2"). That the
# hosting container's /tmp (LMI's downloads, LMCache's disk tier) is the whole instance store
# is an assumption: djl-serving's own (lmcache_utils.py calculate_disk_cache_size sizes from
# shutil.disk_usage('/tmp'), "# assumes /tmp is a NVMe"), and what botocore ResourceConfig
# documents for training ("use the entire capacity of the instance storage", ml.p4d); hosting
# documents no mount point. lmikit's image measures /tmp at start; the stock image gets a
# note (render.sagemaker.stock_disk_tier_clause).
EBS_VOLUME_MAX_GB = 512
EBS_VOLUME_MIN_GB = 30
VOLUME_USABLE_FRACTION = 0.9  # filesystem overhead and free-space margin
DOWNLOAD_SLACK = sizing.DOWNLOAD_SLACK


def weights_source(spec: DeploymentSpec) -> WeightsSource:
    """Where the base model's weights come from for this spec (see the module docstring)."""
    if not spec.model.is_s3:
        return "hub"
    return "s3-sagemaker" if spec.security.network_isolation else "s3"


@dataclass(frozen=True)
class StartupEstimate:
    """Expected start-up of one model copy, and the timeouts sized from it (seconds)."""

    source: str
    weight_bytes: int
    sagemaker_download_s: float
    container_download_s: float
    load_s: float
    warmup_s: float
    download_timeout_s: int
    health_check_timeout_s: int
    model_loading_timeout_s: int
    pin_s: float = 0.0  # pinning LMCache's CPU tier in the largest worker (PIN_BYTES_PER_S)

    @property
    def expected_s(self) -> float:
        """Download + load + pinning + warm-up, without margin."""
        return (self.sagemaker_download_s + self.container_download_s + self.load_s
                + self.pin_s + self.warmup_s)

    @property
    def capped(self) -> bool:
        """True when a timeout the estimate asks for exceeds the API maximum."""
        need_health = MARGIN * (self.container_download_s + self.load_s + self.pin_s
                                + self.warmup_s)
        need_download = MARGIN * self.sagemaker_download_s
        return max(need_health, need_download) > API_TIMEOUT_MAX_S

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["expected_s"] = round(self.expected_s)
        out["capped"] = self.capped
        return out


def _timeout(seconds: float) -> int:
    """``seconds`` with the margin, rounded up to a minute, within [600, 3600]."""
    wanted = math.ceil(MARGIN * seconds / 60) * 60
    return int(min(API_TIMEOUT_MAX_S, max(TIMEOUT_FLOOR_S, wanted)))


def estimate_startup(weight_bytes: int, source: WeightsSource,
                     pinned_bytes: int = 0) -> StartupEstimate:
    """The start-up estimate and timeouts for ``weight_bytes`` of weights from ``source``,
    with ``pinned_bytes`` of LMCache CPU tier in the largest worker.

    - ``ModelDataDownloadTimeoutInSeconds``: what SageMaker copies before the container
      starts (the weights for ``s3-sagemaker``, else a small artifact), with the margin;
    - ``ContainerStartupHealthCheckTimeoutInSeconds``: in-container download + load +
      pinning + warm-up, with the margin;
    - the container's own model-loading timeout is never below the health check (nor below
      the image's 1200 s), so LMI never gives up before SageMaker does.
    """
    if weight_bytes < 0 or pinned_bytes < 0:
        raise ValueError(f"weight_bytes and pinned_bytes must be >= 0 (got {weight_bytes}, "
                         f"{pinned_bytes})")
    sm_download = weight_bytes / S3_DOWNLOAD_BYTES_PER_S if source == "s3-sagemaker" else 0.0
    rate = {"hub": HUB_DOWNLOAD_BYTES_PER_S, "s3": S3_DOWNLOAD_BYTES_PER_S}.get(source)
    in_container = weight_bytes / rate if rate else 0.0
    load = weight_bytes / LOAD_BYTES_PER_S
    pin = pinned_bytes / PIN_BYTES_PER_S
    health = _timeout(in_container + load + pin + WARMUP_S)
    return StartupEstimate(
        source=source, weight_bytes=weight_bytes, sagemaker_download_s=round(sm_download, 1),
        container_download_s=round(in_container, 1), load_s=round(load, 1), warmup_s=WARMUP_S,
        download_timeout_s=_timeout(sm_download), health_check_timeout_s=health,
        model_loading_timeout_s=max(LMI_IMAGE_MODEL_LOADING_TIMEOUT_S, health),
        pin_s=round(pin, 1))


def startup_warning(estimate: StartupEstimate) -> str | None:
    """A plan warning when the expected start exceeds what SageMaker waits for."""
    if not estimate.capped:
        return None
    where = {"hub": "the Hugging Face Hub", "s3": "S3 (copied by LMI)",
             "s3-sagemaker": "S3 (copied by SageMaker)"}[estimate.source]
    return (f"expected start-up {estimate.expected_s / 60:.0f} min "
            f"({estimate.weight_bytes / 1e9:.0f} GB of weights from {where}, load, pinning the "
            "CPU tier and warm-up) "
            "exceeds SageMaker's "
            f"{API_TIMEOUT_MAX_S} s limit with a {MARGIN:g}x margin; the timeouts are capped at "
            f"{API_TIMEOUT_MAX_S} s and the copy may be replaced before it is ready. Stage the "
            "weights in S3 in the region (model.id: s3://...), use a quantized checkpoint, or "
            "expect to retry")


@dataclass(frozen=True)
class Volume:
    """The instance's ML storage volume, and what the weights leave of it."""

    kind: str  # "nvme" | "ebs"
    size_gb: float
    weights_gb: float  # all copies' downloaded weights, with download slack
    volume_size_in_gb: int | None  # VolumeSizeInGB to request (EBS only)

    @property
    def free_bytes(self) -> int:
        """Bytes left for a disk tier after every copy's weights."""
        return max(0, int((self.size_gb - self.weights_gb) * 1e9))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def instance_volume(nvme_gb: float, weight_bytes: int, copies: int) -> Volume:
    """The volume the instance mounts and what the weights of ``copies`` copies take of it.

    Every copy keeps its own downloaded weights (each is its own container: the Hub cache,
    LMI's download directory or ``/opt/ml/model``). With instance NVMe the volume is the
    instance store; without it an EBS volume sized for the weights (1.1x per copy, at least
    30 GB, at most 512 GB, the API maximum) is requested with ``VolumeSizeInGB``.
    """
    weights_gb = DOWNLOAD_SLACK * weight_bytes * copies / 1e9
    if nvme_gb > 0:
        return Volume("nvme", nvme_gb, round(weights_gb, 1), None)
    size = min(EBS_VOLUME_MAX_GB, max(EBS_VOLUME_MIN_GB,
                                      math.ceil(weights_gb / VOLUME_USABLE_FRACTION)))
    return Volume("ebs", float(size), round(weights_gb, 1), size)


def volume_problem(volume: Volume) -> str | None:
    """Why the weights do not fit the volume, or None."""
    usable = volume.size_gb * VOLUME_USABLE_FRACTION
    if volume.weights_gb <= usable:
        return None
    what = ("the instance's NVMe" if volume.kind == "nvme"
            else f"the largest EBS volume SageMaker attaches ({EBS_VOLUME_MAX_GB} GB)")
    return (f"the weights of every copy ({volume.weights_gb:.0f} GB with download slack) do not "
            f"fit {what} ({usable:.0f} GB usable of {volume.size_gb:.0f} GB); lower "
            "instance.copies_per_instance or choose an instance type with more local storage")
