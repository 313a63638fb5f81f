"""GPU calibration records: measured prefill, decode weight reads and pinned copies, with
their hardware.

Its rules and their sources: docs/planner-model.md, "GPU calibration records".

>>> point = PrefillPoint("Qwen/Qwen3-8B", 4096, 0.13)
>>> round(prefill_mfu(point, 989.0), 3)  # on an H100 SXM's 989 dense bf16 TFLOP/s
0.56
>>> round(decode_hbm_efficiency(DecodePoint("Qwen/Qwen3-8B", 1, 16_000_000_000, 0.0055),
...                             3350.0), 3)  # an H100 SXM's 3.35 TB/s
0.868
>>> copy_gbps(CopyPoint("host_to_gpu", 37_748_736, 40, 0.06))
25.17
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lmikit import sizing
from lmikit._files import FileRefused, read_limited
from lmikit.errors import SimulationError, safe_repr
from lmikit.sim._coefficients import Coefficients

FORMAT = "lmikit-gpu-calibration/v1"
MAX_FILE_BYTES = 1_000_000  # a record is a few kilobytes
MAX_POINTS = 1_000
DIRECTIONS = ("host_to_gpu", "gpu_to_host")
LAYOUTS = ("unfused", "fused")  # transformers' separate q/k/v and gate/up, or vLLM's packed
# attention kernels a suffix prefill is timed with: PyTorch SDPA's FlashAttention-2 and cuDNN
KERNELS = ("flash", "cudnn")
LMCACHE_CHUNK_TOKENS = 256  # LMCache's default chunk_size (lmcache/v1/config.py)
MEASURED_DIR = Path(__file__).parent / "calibration"  # the records lmikit ships


@dataclass(frozen=True)
class Hardware:
    """Where a record was measured; empty strings where the machine did not say."""

    gpu: str  # torch.cuda.get_device_name()
    gpu_memory_mib: int
    catalog_gpu: str  # the lmikit catalog GPU it matches (:func:`catalog_gpu_for`), or ""
    driver: str = ""
    cuda: str = ""
    torch: str = ""
    transformers: str = ""
    cpu: str = ""
    pcie: str = ""  # the link's maximum generation and width, from nvidia-smi ("Gen5 x16")


@dataclass(frozen=True)
class PrefillPoint:
    """One prompt of ``tokens`` prefilled from nothing cached: the median of its repeats."""

    model_id: str
    tokens: int
    seconds: float


@dataclass(frozen=True)
class DecodePoint:
    """Every linear layer's bf16 weights (``weight_bytes`` in all) applied to ``batch``
    tokens: the median time of one pass, in one of :data:`LAYOUTS`."""

    model_id: str
    batch: int
    weight_bytes: int
    seconds: float
    layout: str = "unfused"  # records before the fused layout was measured hold unfused only


@dataclass(frozen=True)
class SuffixPoint:
    """``new_tokens`` prefilled after ``context_tokens`` cached, on one rank of ``tp``."""

    model_id: str
    tp: int
    context_tokens: int
    new_tokens: int
    seconds: float
    kernel: str = "flash"  # the attention kernel timed, one of KERNELS


@dataclass(frozen=True)
class CopyPoint:
    """``chunks`` copies of ``chunk_bytes`` each, one after another: the median total time."""

    direction: str  # one of DIRECTIONS
    chunk_bytes: int
    chunks: int
    seconds: float


@dataclass(frozen=True)
class GpuCalibration:
    measured_at: str  # ISO date
    hardware: Hardware
    prefill: tuple[PrefillPoint, ...]
    copies: tuple[CopyPoint, ...]
    decode: tuple[DecodePoint, ...] = ()  # records before decode was measured hold none
    suffix: tuple[SuffixPoint, ...] = ()  # nor before suffix prefills were

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "measured_at": self.measured_at,
                "hardware": asdict(self.hardware),
                "prefill": [asdict(p) for p in self.prefill],
                "copies": [asdict(c) for c in self.copies],
                "decode": [asdict(d) for d in self.decode],
                "suffix": [asdict(p) for p in self.suffix]}

    def summary(self) -> dict[str, Any]:
        """The figures in the simulator's terms: MFU per prefill point and memory-bandwidth
        efficiency per decode point (where the GPU is in the catalog), GB/s per copy point."""
        peak = _peak_tflops(self.hardware.catalog_gpu)
        hbm = _hbm_gbps(self.hardware.catalog_gpu)
        return {
            "hardware": asdict(self.hardware),
            "prefill": [{**asdict(p), "tokens_per_s": round(p.tokens / p.seconds, 1),
                         "prefill_mfu": None if peak is None
                         else round(prefill_mfu(p, peak), 4)} for p in self.prefill],
            "copies": [{**asdict(c), "gbps": copy_gbps(c)} for c in self.copies],
            "decode": [{**asdict(d), "hbm_efficiency": None if hbm is None
                        else round(decode_hbm_efficiency(d, hbm), 4)} for d in self.decode],
            "suffix": [{**asdict(p), "modelled_seconds": None if peak is None
                        else round(suffix_modelled_seconds(p, self.hardware.catalog_gpu), 6)}
                       for p in self.suffix],
        }


def prefill_mfu(point: PrefillPoint, peak_tflops: float) -> float:
    """The ``prefill_mfu`` that makes the engine model's prefill take ``point.seconds``."""
    from lmikit.catalog import get_model

    geo = get_model(point.model_id)
    flops = sizing.prefill_flops(geo.active_params, geo.num_layers, geo.attention_dim,
                                 point.tokens, 0)
    return flops / (point.seconds * peak_tflops * 1e12)


def decode_hbm_efficiency(point: DecodePoint, hbm_gbps: float) -> float:
    """Share of ``hbm_gbps`` (GB/s) that reading ``point``'s weights once reached."""
    return point.weight_bytes / point.seconds / (hbm_gbps * 1e9)


def suffix_modelled_seconds(point: SuffixPoint, catalog_gpu: str,
                            coeff: Coefficients | None = None) -> float:
    """The engine model's :meth:`~lmikit.sim.EngineModel.prefill_s` for ``point`` on
    ``catalog_gpu`` (default coefficients unless given): the same rank share, no all-reduce,
    bf16 weights as the script builds them. The engine is :func:`~lmikit.sim.engine_for`
    on a catalog instance with that GPU; a prefill does not depend on which one."""
    from lmikit.catalog import get_model
    from lmikit.sim._engine import engine_for

    instance = _catalog_instance(catalog_gpu)
    if instance is None:
        raise SimulationError(f"catalog_gpu {catalog_gpu!r} is not a catalog GPU; valid: "
                              + ", ".join(n for n, *_ in _NAMES))
    engine = engine_for(point.model_id, instance, point.tp, coeff=coeff,
                        weight_bytes=get_model(point.model_id).weight_bytes_for("bfloat16"))
    return engine.prefill_s(point.new_tokens, point.context_tokens)


def copy_gbps(point: CopyPoint) -> float:
    """Bytes moved per second, in GB/s (1e9 bytes), to two decimals."""
    return round(point.chunk_bytes * point.chunks / point.seconds / 1e9, 2)


def kv_chunk_bytes(model_id: str, chunk_tokens: int = LMCACHE_CHUNK_TOKENS) -> int:
    """Bytes of one LMCache chunk of ``model_id``'s bf16 KV on one GPU (tensor parallel 1)."""
    from lmikit.catalog import get_model

    return get_model(model_id).kv_bytes_per_token(2) * chunk_tokens


# torch.cuda.get_device_name() -> lmikit catalog GPU: (catalog GPU, words of the device name
# that must all appear, words that must not, least memory in MiB). The catalog lists SXM
# parts; the H100 PCIe and NVL cards have other peaks, so only the SXM H100 ("HBM3") matches,
# and PCIe cards match nothing.
_NAMES: tuple[tuple[str, tuple[str, ...], tuple[str, ...], int], ...] = (
    ("NVIDIA H200 141GB", ("H200",), (), 0),
    ("NVIDIA H100 SXM 80GB", ("H100", "HBM3"), ("PCIE", "NVL"), 0),
    ("NVIDIA B200 180GB", ("B200",), (), 0),
    ("NVIDIA A100 80GB", ("A100",), ("PCIE",), 60_000),
    ("NVIDIA A100 40GB", ("A100",), ("PCIE",), 0),
    ("NVIDIA L40S", ("L40S",), (), 0),
    ("NVIDIA A10G", ("A10G",), (), 0),
    ("NVIDIA L4", ("L4",), ("L40",), 0),
)


def catalog_gpu_for(device_name: str, memory_mib: int) -> str:
    """The catalog GPU a CUDA device is, by its name and memory; "" when none matches.

    >>> catalog_gpu_for("NVIDIA H100 80GB HBM3", 81559)
    'NVIDIA H100 SXM 80GB'
    >>> catalog_gpu_for("NVIDIA H100 PCIe", 81559)
    ''
    """
    words = device_name.upper().replace("-", " ").split()
    for name, need, refuse, least in _NAMES:
        if all(w in words for w in need) and not any(w in words for w in refuse) \
                and memory_mib >= least:
            return name
    return ""


def _catalog_instance(catalog_gpu: str) -> str | None:
    """The first catalog instance type whose GPU is ``catalog_gpu``, or None."""
    from lmikit.catalog import INSTANCES

    return next((name for name, inst in INSTANCES.items() if inst.gpu.name == catalog_gpu),
                None)


def _peak_tflops(catalog_gpu: str) -> float | None:
    from lmikit.catalog import get_instance

    instance = _catalog_instance(catalog_gpu)
    return None if instance is None else get_instance(instance).gpu.bf16_dense_tflops


def _hbm_gbps(catalog_gpu: str) -> float | None:
    from lmikit.sim._coefficients import HBM_GBPS

    return HBM_GBPS[catalog_gpu][0] if catalog_gpu in HBM_GBPS else None


def load(path: str | Path) -> GpuCalibration:
    """Read and check a record written by ``benchmarks/gpu_calibration.py``."""
    p = Path(path)
    where = f"GPU calibration file {str(p)!r}"
    try:
        data = json.loads(read_limited(p, MAX_FILE_BYTES, where))
    except FileRefused as exc:
        raise SimulationError(str(exc)) from exc
    except ValueError as exc:
        raise SimulationError(f"cannot read {where}: {exc}") from exc
    return from_dict(data, where)


def measured() -> tuple[GpuCalibration, ...]:
    """The records lmikit ships (``lmikit/sim/calibration/*.json``), in file-name order:
    what the defaults in :mod:`lmikit.sim` and the catalog's effective
    host->GPU figure were checked against, each with the hardware it came from."""
    return tuple(load(path) for path in sorted(MEASURED_DIR.glob("*.json")))


def from_dict(data: Any, where: str = "GPU calibration") -> GpuCalibration:
    """A record from its JSON form; errors name the field, the value and what is valid."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SimulationError(f"{where}: not a {FORMAT} record (write one with "
                              "benchmarks/gpu_calibration.py)")
    hw = _object(data.get("hardware"), f"{where}: hardware")
    hardware = Hardware(
        gpu=_text(hw, "gpu", f"{where}: hardware"),
        gpu_memory_mib=_count(hw.get("gpu_memory_mib"), f"{where}: hardware.gpu_memory_mib"),
        catalog_gpu=_text(hw, "catalog_gpu", f"{where}: hardware", required=False),
        **{k: _text(hw, k, f"{where}: hardware", required=False)
           for k in ("driver", "cuda", "torch", "transformers", "cpu", "pcie")})
    if hardware.catalog_gpu and _peak_tflops(hardware.catalog_gpu) is None:
        raise SimulationError(f"{where}: hardware.catalog_gpu {hardware.catalog_gpu!r} is not "
                              "a catalog GPU; valid: " + ", ".join(n for n, *_ in _NAMES)
                              + ", or empty")
    prefill = tuple(
        PrefillPoint(_model(row, f"{where}: prefill[{i}]"),
                     _count(row.get("tokens"), f"{where}: prefill[{i}].tokens"),
                     _seconds(row.get("seconds"), f"{where}: prefill[{i}].seconds"))
        for i, row in enumerate(_rows(data, "prefill", where)))
    copies = []
    for i, row in enumerate(_rows(data, "copies", where)):
        at = f"{where}: copies[{i}]"
        direction = row.get("direction")
        if direction not in DIRECTIONS:
            raise SimulationError(f"{at}.direction must be one of {', '.join(DIRECTIONS)} "
                                  f"(got {direction!r})")
        copies.append(CopyPoint(direction, _count(row.get("chunk_bytes"), f"{at}.chunk_bytes"),
                                _count(row.get("chunks"), f"{at}.chunks"),
                                _seconds(row.get("seconds"), f"{at}.seconds")))
    decode = []
    for i, row in enumerate(_rows(data, "decode", where)):
        at = f"{where}: decode[{i}]"
        layout = row.get("layout", "unfused")
        if layout not in LAYOUTS:
            raise SimulationError(f"{at}.layout must be one of {', '.join(LAYOUTS)} "
                                  f"(got {layout!r})")
        decode.append(DecodePoint(_model(row, at), _count(row.get("batch"), f"{at}.batch"),
                                  _count(row.get("weight_bytes"), f"{at}.weight_bytes"),
                                  _seconds(row.get("seconds"), f"{at}.seconds"), layout))
    suffix = []
    for i, row in enumerate(_rows(data, "suffix", where)):
        at = f"{where}: suffix[{i}]"
        context = row.get("context_tokens")
        if isinstance(context, bool) or not isinstance(context, int) \
                or not 0 <= context <= 1 << 40:
            raise SimulationError(f"{at}.context_tokens must be a whole number from 0 to "
                                  f"{1 << 40} (got {context!r})")
        kernel = row.get("kernel", "flash")
        if kernel not in KERNELS:
            raise SimulationError(f"{at}.kernel must be one of {', '.join(KERNELS)} "
                                  f"(got {kernel!r})")
        suffix.append(SuffixPoint(_model(row, at), _count(row.get("tp"), f"{at}.tp"), context,
                                  _count(row.get("new_tokens"), f"{at}.new_tokens"),
                                  _seconds(row.get("seconds"), f"{at}.seconds"), kernel))
    if not prefill and not copies and not decode and not suffix:
        raise SimulationError(f"{where}: holds no prefill, decode, suffix or copy measurement")
    measured_at = data.get("measured_at")
    if not isinstance(measured_at, str) or not measured_at:
        raise SimulationError(f"{where}: measured_at must be the date of the measurement "
                              f"(got {measured_at!r})")
    return GpuCalibration(measured_at, hardware, prefill, tuple(copies), tuple(decode),
                          tuple(suffix))


def _object(value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SimulationError(f"{at} must be an object (got {type(value).__name__})")
    return value


def _rows(data: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    rows = data.get(key, [])
    if not isinstance(rows, list) or len(rows) > MAX_POINTS:
        raise SimulationError(f"{where}: {key} must be a list of at most {MAX_POINTS} "
                              "measurements")
    return [_object(row, f"{where}: {key}[{i}]") for i, row in enumerate(rows)]


def _text(obj: dict[str, Any], key: str, at: str, required: bool = True) -> str:
    value = obj.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value) or len(value) > 200:
        raise SimulationError(f"{at}.{key} must be text of at most 200 characters"
                              f"{'' if not required else ', not empty'} (got {value!r})")
    return value


def _count(value: Any, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 40:
        raise SimulationError(f"{at} must be a whole number from 1 to {1 << 40} "
                              f"(got {value!r})")
    return value


def _seconds(value: Any, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value <= 3600 or not math.isfinite(value):
        raise SimulationError(f"{at} must be a number of seconds above 0, at most 3600 "
                              f"(got {safe_repr(value)})")
    return float(value)


def _model(row: dict[str, Any], at: str) -> str:
    from lmikit.catalog import catalog_ids

    model = row.get("model_id")
    if model not in catalog_ids():
        raise SimulationError(f"{at}.model_id {model!r} is not a catalog model; valid: "
                              + ", ".join(catalog_ids()))
    return str(model)
