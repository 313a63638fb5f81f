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

Planning rates are assumptions (every plan lists them); :data:`RATES` gives each one's basis.
No AWS source publishes a rate for SageMaker's copy of model data or for LMI's s5cmd copy, and
no LMI version lmikit renders streams weights from S3 to the GPU (:data:`FASTER_LOADERS`).
The timeouts add a 1.5x margin, rounded up to whole minutes, never below 600 s (SageMaker's
usual default) and never above 3600 s, the API maximum of both
``ContainerStartupHealthCheckTimeoutInSeconds`` and ``ModelDataDownloadTimeoutInSeconds``
(botocore's SageMaker model: min 60, max 3600). A start that needs more is ``capped``, and
:func:`startup_problem` says why the SageMaker targets refuse it.

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

HUB_DOWNLOAD_BYTES_PER_S = 100e6  # each rate's basis: RATES
S3_DOWNLOAD_BYTES_PER_S = 1e9  # at most; see s3_download_bytes_per_s
S3_NETWORK_SHARE = 0.5  # of the instance's network bandwidth
LOAD_BYTES_PER_S = 500e6
WARMUP_S = 300.0
# Pinning LMCache's CPU tier. Every LMCache an LMI release ships (lmikit.planner._versions
# LMCACHE_SHIPPED) allocates the whole max_local_cpu_size at engine start as pinned host
# memory, one cudaHostAlloc per worker (LMCache >= 0.3.13 local_cpu_backend.py ignores
# enable_lazy_memory_allocator; LMCache PR #2951). Third-party measurements of one
# cudaHostAlloc, none on SageMaker: 20 GB in 17.4 s on a 48-core host (novitalabs/pegaflow PR
# #277, ~1.15 GB/s); 16 GiB in 7.9 s on EC2 g6.4xlarge (NVIDIA/cudf PR #23457, ~2.2 GB/s).
# The slower is used, for the largest worker: a copy's workers pin at once, each in its own
# process (whether they slow each other down: not found).
PIN_BYTES_PER_S = 1.15e9
# (rate, basis): every figure the estimate rests on is lmikit's assumption, with its basis.
RATES: dict[str, tuple[str, str]] = {
    "hub": (f"{HUB_DOWNLOAD_BYTES_PER_S / 1e6:g} MB/s, assumed",
            "the LMI image sets HF_HUB_ENABLE_HF_TRANSFER=1 (djl-serving serving/docker/"
            "lmi.Dockerfile); hf_transfer's README places plain Python's ceiling near 500 MB/s. "
            "A fifth of that is a rate most regions and instance sizes sustain"),
    "s3": (f"the smaller of {S3_DOWNLOAD_BYTES_PER_S / 1e9:g} GB/s and half the instance's "
           "network bandwidth, assumed",
           "no SageMaker-published rate exists for either copy of S3 weights (SageMaker's "
           "ModelDataSource copy, LMI's s5cmd copy in wlm ModelInfo.downloadS3). Third-party "
           "EC2 measurements: s5cmd's README reports ~4.3 GB/s downloads saturating a "
           "40 Gbit/s link; dvassallo/s3-benchmark (2019) measured 6.3 GB/s on p3dn.24xlarge "
           "and 8.0 GB/s on c5n.18xlarge, 50-64% of their 100 Gbit/s networks"),
    "load": (f"{LOAD_BYTES_PER_S / 1e6:g} MB/s, assumed",
             "safetensors read + copy to the GPUs: a gp2 EBS volume tops out at 250 MB/s, "
             "instance NVMe at GB/s, and weights just downloaded are usually in the page cache"),
    "pinning": (f"{PIN_BYTES_PER_S / 1e9:g} GB/s per worker, third-party",
                "cudaHostAlloc measurements off SageMaker (PIN_BYTES_PER_S): the slower of "
                "novitalabs/pegaflow PR #277 and NVIDIA/cudf PR #23457"),
    "warm-up": (f"{WARMUP_S:g} s, assumed",
                "vLLM's CUDA-graph capture and compilation, LMCache set-up, the first health "
                "check"),
}
# Faster loaders and whether any LMI path lmikit renders (the async vLLM service, 0.33.0+)
# has one; each with its source.
FASTER_LOADERS: dict[str, str] = {
    "SageMaker Fast Model Loader (option.load_format=sagemaker_fast_model_loader, weights "
    "streamed from S3 to the GPUs)":
        "not on lmikit's path: it ran on LMI's lmi-dist engine (djl-serving serving/docker/"
        "partition/sm_neo_shard.py, 0.31.0-dlc to 0.34.0-dlc) and was removed with it in "
        "0.35.0 (djl-serving commit 220cfa53)",
    "vLLM's Run:ai model streamer (load_format runai_streamer)":
        "not on LMI's path: LMI copies an s3:// option.model_id with s5cmd and hands vLLM the "
        "local directory (djl-serving wlm ModelInfo.java downloadS3); no "
        "lmi-container-requirements.txt from 0.35.0-dlc to master installs "
        "runai-model-streamer",
}
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


def s3_download_bytes_per_s(network_gbit: float = 0.0) -> float:
    """The assumed S3 copy rate (:data:`RATES` "s3"): 1 GB/s, or half the instance's network
    bandwidth where that is less (``network_gbit`` 0: unknown, 1 GB/s).

    >>> s3_download_bytes_per_s(3200), s3_download_bytes_per_s(10)
    (1000000000.0, 625000000.0)
    """
    if network_gbit <= 0:
        return S3_DOWNLOAD_BYTES_PER_S
    return min(S3_DOWNLOAD_BYTES_PER_S, S3_NETWORK_SHARE * network_gbit * 1e9 / 8)


def estimate_startup(weight_bytes: int, source: WeightsSource, network_gbit: float = 0.0,
                     pinned_bytes: int = 0) -> StartupEstimate:
    """The start-up estimate and timeouts for ``weight_bytes`` of weights from ``source``,
    with ``pinned_bytes`` of LMCache CPU tier in the largest worker.

    - ``ModelDataDownloadTimeoutInSeconds``: what SageMaker copies before the container
      starts (the weights for ``s3-sagemaker``, else a small artifact), with the margin;
    - ``ContainerStartupHealthCheckTimeoutInSeconds``: in-container download + load +
      pinning + warm-up, with the margin;
    - the container's own model-loading timeout is never below the health check (nor below
      the image's 1200 s), so LMI never gives up before SageMaker does.

    ``network_gbit``: the instance's network bandwidth, which bounds the S3 rate.
    """
    if weight_bytes < 0 or pinned_bytes < 0:
        raise ValueError(f"weight_bytes and pinned_bytes must be >= 0 (got {weight_bytes}, "
                         f"{pinned_bytes})")
    s3_rate = s3_download_bytes_per_s(network_gbit)
    sm_download = weight_bytes / s3_rate if source == "s3-sagemaker" else 0.0
    rate = {"hub": HUB_DOWNLOAD_BYTES_PER_S, "s3": s3_rate}.get(source)
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


_WHERE = {"hub": "the Hugging Face Hub", "s3": "S3 (copied by LMI)",
          "s3-sagemaker": "S3 (copied by SageMaker)"}


def _over_cap(estimate: StartupEstimate) -> str:
    """What the capped estimate exceeds, with its figures."""
    e = estimate
    parts = []
    if MARGIN * e.sagemaker_download_s > API_TIMEOUT_MAX_S:
        parts.append(f"SageMaker's copy of {e.weight_bytes / 1e9:.0f} GB of weights takes an "
                     f"expected {e.sagemaker_download_s / 60:.0f} min "
                     "(ModelDataDownloadTimeoutInSeconds)")
    inside = e.container_download_s + e.load_s + e.pin_s + e.warmup_s
    if MARGIN * inside > API_TIMEOUT_MAX_S:
        download = (f"download {e.container_download_s / 60:.0f} min from "
                    f"{_WHERE[e.source]}, " if e.container_download_s else "")
        pin = f"pinning the CPU tier {e.pin_s / 60:.0f} min, " if e.pin_s else ""
        parts.append(f"the container's start takes an expected {inside / 60:.0f} min "
                     f"({download}load {e.load_s / 60:.0f} min, {pin}warm-up "
                     f"{e.warmup_s / 60:.0f} min; ContainerStartupHealthCheckTimeoutInSeconds "
                     "and LMI's option.model_loading_timeout)")
    return "; ".join(parts)


def startup_warning(estimate: StartupEstimate) -> str | None:
    """A plan warning when the expected start exceeds what SageMaker waits for."""
    if not estimate.capped:
        return None
    return (f"{_over_cap(estimate)}: with the {MARGIN:g}x margin that exceeds SageMaker's "
            f"{API_TIMEOUT_MAX_S} s limit, so the SageMaker targets refuse this model, "
            "instance and weights source; stage the weights in S3 (lmikit weights stage), use "
            "a quantized checkpoint or an instance with more network bandwidth")


def startup_problem(estimate: StartupEstimate, model_id: str,
                    catalog_id: str | None = None) -> str | None:
    """Why a SageMaker deployment of ``model_id`` cannot start within the API's caps, and
    what to change; None when it can. ``catalog_id``: the Hub id of staged weights."""
    if not estimate.capped:
        return None
    hub_id = catalog_id or model_id
    if estimate.source == "hub":
        fix = (f"stage the weights in S3 in the endpoint's region: `lmikit weights stage "
               f"{hub_id} s3://BUCKET/PREFIX/`, then set model.id to that prefix and "
               f"model.hub_id to {hub_id} (an S3 copy is assumed at "
               f"{RATES['s3'][0]}); or serve a quantized checkpoint")
    elif estimate.source == "s3":
        fix = ("turn on security.network_isolation so that SageMaker copies the weights "
               "before the container starts, under its own timeout; or serve a quantized "
               "checkpoint, or choose an instance with more network bandwidth")
    else:
        fix = "serve a quantized checkpoint, or choose an instance with more network bandwidth"
    return (f"model.id {model_id!r}: {_over_cap(estimate)}. With lmikit's {MARGIN:g}x margin "
            f"that passes SageMaker's maximum of {API_TIMEOUT_MAX_S} s (botocore: "
            "ProductionVariant timeouts at most 3600), so the endpoint would be replaced "
            f"before it is ready. Fix: {fix}. The rates are assumptions "
            "(`lmikit plan` lists them)")


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
