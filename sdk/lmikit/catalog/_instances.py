"""SageMaker GPU instance catalog.

Pure data, standard library only (the container imports it too). Every figure is a
published hardware fact with its source named per family; ``host_to_gpu_gbps`` and
``nvme_read_gbps`` are *effective* bandwidths (GB/s, 1e9 bytes) used by the planner,
not link maxima, and say how they were derived.

GPU memory is given in GiB as the driver reports it (the published "80 GB" A100 shows
81920 MiB), because that is what vLLM's ``gpu_memory_utilization`` multiplies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gib: float
    bf16_dense_tflops: float
    source: str
    compute_capability: tuple[int, int]  # CUDA (major, minor): which kernels vLLM can run


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpu: Gpu
    gpu_count: int
    vcpus: int
    host_memory_gib: float
    nvme_gb: float
    nvme_drives: int
    host_to_gpu_gbps: float
    nvme_read_gbps: float
    family_source: str
    nvlink: bool = False  # GPUs joined by NVLink/NVSwitch; False: they talk over PCIe
    network_gbit: float = 0.0  # the instance's network bandwidth ("up to" burst), Gbit/s

    @property
    def family(self) -> str:
        return self.name.split(".")[1]

    @property
    def has_nvme(self) -> bool:
        return self.nvme_gb > 0

    @property
    def total_gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib * self.gpu_count


# --- GPUs -------------------------------------------------------------------------------
# bf16 dense tensor throughput (no sparsity) from NVIDIA's data sheets; compute capability
# from NVIDIA's "CUDA GPU Compute Capability" table (https://developer.nvidia.com/cuda-gpus).
A10G = Gpu("NVIDIA A10G", 22.5, 125.0,
           "NVIDIA A10 data sheet (BF16 tensor 125 TFLOPS dense); A10G reports 23028 MiB",
           (8, 6))
L4 = Gpu("NVIDIA L4", 22.5, 121.0,
         "NVIDIA L4 data sheet (BF16 242 TFLOPS with sparsity -> 121 dense); 23034 MiB", (8, 9))
L40S = Gpu("NVIDIA L40S", 45.0, 362.0,
           "NVIDIA L40S data sheet (BF16 733 TFLOPS with sparsity -> 362 dense); 46068 MiB",
           (8, 9))
A100_40 = Gpu("NVIDIA A100 40GB", 40.0, 312.0, "NVIDIA A100 data sheet (BF16 312 TFLOPS dense)",
              (8, 0))
A100_80 = Gpu("NVIDIA A100 80GB", 80.0, 312.0,
              "NVIDIA A100 data sheet (BF16 312 TFLOPS dense); 81920 MiB", (8, 0))
H100 = Gpu("NVIDIA H100 SXM 80GB", 79.6, 989.0,
           "NVIDIA H100 data sheet (SXM BF16 1979 TFLOPS with sparsity -> 989 dense); 81559 MiB",
           (9, 0))
H200 = Gpu("NVIDIA H200 141GB", 140.4, 989.0,
           "NVIDIA H200 data sheet (BF16 as H100 SXM, 989 dense); 143771 MiB", (9, 0))
B200 = Gpu("NVIDIA B200 180GB", 179.0, 2250.0,
           "NVIDIA DGX B200 data sheet (BF16 2.25 PFLOPS dense per GPU); 183359 MiB", (10, 0))

# Effective host->GPU copy bandwidth per GPU, as measured by pinned-memory cudaMemcpy:
# PCIe Gen4 x16 ~25 GB/s of the 32 GB/s raw; Gen5 x16 ~50 GB/s of 64. On Gen5 x16 hosts
# with an H100 SXM and an H200, 40 back-to-back pinned copies of KV chunks (7-38 MB) moved
# 54.0-55.2 GB/s each way (lmikit/sim/calibration, benchmarks/gpu_calibration.py).
_GEN4 = 25.0
_GEN5 = 50.0


def _family(
    gpu: Gpu,
    source: str,
    link: float,
    drive_read: float,
    sizes: dict[str, tuple[int, int, float, float, int]],
    nvlink: bool = False,
) -> dict[str, InstanceType]:
    """sizes: name -> (gpus, vcpus, host GiB, NVMe GB total, NVMe drives)."""
    out = {}
    for name, (gpus, vcpus, mem, nvme, drives) in sizes.items():
        out[name] = InstanceType(
            name=name, gpu=gpu, gpu_count=gpus, vcpus=vcpus, host_memory_gib=mem,
            nvme_gb=nvme, nvme_drives=drives, host_to_gpu_gbps=link,
            nvme_read_gbps=drive_read * drives, family_source=source, nvlink=nvlink,
        )
    return out


INSTANCES: dict[str, InstanceType] = {}

# GPU-to-GPU links. The g5, g6 and g6e GPUs (A10G, L4, L40S) have no NVLink (NVIDIA's A10,
# L4 and L40S data sheets list PCIe Gen4 x16 as their only interconnect), so a
# tensor-parallel engine on them all-reduces over PCIe; the p4d/p4de A100s are joined by
# NVSwitch (AWS "Amazon EC2 P4d instances deep dive", 2020-11-03: "8 x 40 GB NVIDIA Tesla
# A100 GPUs with NVSwitch"), the p5/p5e/p5en H100s and H200s by 900 GB/s NVSwitch and the
# p6-b200 B200s by 1.8 TB/s NVLink (the P5 and P6 pages).

# g5: AWS "Amazon EC2 G5 instances" product page (A10G, PCIe Gen4, local NVMe per size).
# NVMe drives here read ~2 GB/s each with O_DIRECT.
INSTANCES |= _family(A10G, "https://aws.amazon.com/ec2/instance-types/g5/", _GEN4, 2.0, {
    "ml.g5.xlarge": (1, 4, 16, 250, 1),
    "ml.g5.2xlarge": (1, 8, 32, 450, 1),
    "ml.g5.4xlarge": (1, 16, 64, 600, 1),
    "ml.g5.8xlarge": (1, 32, 128, 900, 1),
    "ml.g5.16xlarge": (1, 64, 256, 1900, 1),
    "ml.g5.12xlarge": (4, 48, 192, 3800, 1),
    "ml.g5.24xlarge": (4, 96, 384, 3800, 1),
    "ml.g5.48xlarge": (8, 192, 768, 7600, 2),
})
# g6: AWS "Amazon EC2 G6 instances" product page (L4, PCIe Gen4). Drive counts as EC2 lists
# the instance store (the 8xlarge's 900 GB is 2 x 450 GB, as on the g6e.8xlarge; the
# g6e.16xlarge's 1900 GB is 2 x 950 GB).
INSTANCES |= _family(L4, "https://aws.amazon.com/ec2/instance-types/g6/", _GEN4, 2.0, {
    "ml.g6.xlarge": (1, 4, 16, 250, 1),
    "ml.g6.2xlarge": (1, 8, 32, 450, 1),
    "ml.g6.4xlarge": (1, 16, 64, 600, 1),
    "ml.g6.8xlarge": (1, 32, 128, 900, 2),
    "ml.g6.16xlarge": (1, 64, 256, 1880, 2),
    "ml.g6.12xlarge": (4, 48, 192, 3760, 4),
    "ml.g6.24xlarge": (4, 96, 384, 3760, 4),
    "ml.g6.48xlarge": (8, 192, 768, 7520, 8),
})
# g6e: AWS "Amazon EC2 G6e instances" product page (L40S, PCIe Gen4).
INSTANCES |= _family(L40S, "https://aws.amazon.com/ec2/instance-types/g6e/", _GEN4, 2.0, {
    "ml.g6e.xlarge": (1, 4, 32, 250, 1),
    "ml.g6e.2xlarge": (1, 8, 64, 450, 1),
    "ml.g6e.4xlarge": (1, 16, 128, 600, 1),
    "ml.g6e.8xlarge": (1, 32, 256, 900, 2),
    "ml.g6e.16xlarge": (1, 64, 512, 1900, 2),
    "ml.g6e.12xlarge": (4, 48, 384, 3800, 2),
    "ml.g6e.24xlarge": (4, 96, 768, 3800, 2),
    "ml.g6e.48xlarge": (8, 192, 1536, 7600, 4),
})
# p4d/p4de: AWS "Amazon EC2 P4 instances" page: 8x A100, 96 vCPU, 1152 GiB, 8x 1000 GB NVMe,
# PCIe Gen4 host link.
_P4 = "https://aws.amazon.com/ec2/instance-types/p4/"
INSTANCES |= _family(A100_40, _P4, _GEN4, 2.0, {"ml.p4d.24xlarge": (8, 96, 1152, 8000, 8)},
                     nvlink=True)
INSTANCES |= _family(A100_80, _P4, _GEN4, 2.0, {"ml.p4de.24xlarge": (8, 96, 1152, 8000, 8)},
                     nvlink=True)
# p5/p5e: AWS "Amazon EC2 P5 instances" page: 8x H100/H200, 192 vCPU, 2048 GiB,
# 8x 3.84 TB NVMe; 3rd-gen AMD EPYC hosts, so the CPU<->GPU path runs at PCIe Gen4.
# p5.4xlarge: 1x H100, 16 vCPU, 256 GiB, 1x 3.84 TB NVMe.
_P5 = "https://aws.amazon.com/ec2/instance-types/p5/"
INSTANCES |= _family(H100, _P5, _GEN4, 3.0, {
    "ml.p5.48xlarge": (8, 192, 2048, 30720, 8),
    "ml.p5.4xlarge": (1, 16, 256, 3840, 1),
}, nvlink=True)
INSTANCES |= _family(H200, _P5, _GEN4, 3.0, {"ml.p5e.48xlarge": (8, 192, 2048, 30720, 8)},
                     nvlink=True)
# p5en: same page: H200 with Intel Sapphire Rapids and PCIe Gen5 between CPU and GPU.
INSTANCES |= _family(H200, _P5, _GEN5, 3.0, {"ml.p5en.48xlarge": (8, 192, 2048, 30720, 8)},
                     nvlink=True)
# p6-b200: AWS "Amazon EC2 P6 instances" page: 8x B200, 192 vCPU, 2048 GiB,
# 8x 3.84 TB NVMe, Intel Emerald Rapids with PCIe Gen5.
INSTANCES |= _family(B200, "https://aws.amazon.com/ec2/instance-types/p6/", _GEN5, 3.0, {
    "ml.p6-b200.48xlarge": (8, 192, 2048, 30720, 8),
}, nvlink=True)


# Network bandwidth, Gbit/s, from the same product pages ("up to" sizes burst to that rate):
# what a remote KV tier can be read at, at most.
NETWORK_GBIT = {
    "ml.g5.xlarge": 10, "ml.g5.2xlarge": 10, "ml.g5.4xlarge": 25, "ml.g5.8xlarge": 25,
    "ml.g5.16xlarge": 25, "ml.g5.12xlarge": 40, "ml.g5.24xlarge": 50, "ml.g5.48xlarge": 100,
    "ml.g6.xlarge": 10, "ml.g6.2xlarge": 10, "ml.g6.4xlarge": 25, "ml.g6.8xlarge": 25,
    "ml.g6.16xlarge": 25, "ml.g6.12xlarge": 40, "ml.g6.24xlarge": 50, "ml.g6.48xlarge": 100,
    "ml.g6e.xlarge": 20, "ml.g6e.2xlarge": 20, "ml.g6e.4xlarge": 20, "ml.g6e.8xlarge": 25,
    "ml.g6e.16xlarge": 35, "ml.g6e.12xlarge": 100, "ml.g6e.24xlarge": 200,
    "ml.g6e.48xlarge": 400,
    "ml.p4d.24xlarge": 400, "ml.p4de.24xlarge": 400,
    "ml.p5.48xlarge": 3200, "ml.p5.4xlarge": 100, "ml.p5e.48xlarge": 3200,
    "ml.p5en.48xlarge": 3200, "ml.p6-b200.48xlarge": 3200,
}
INSTANCES = {name: dataclasses.replace(inst, network_gbit=NETWORK_GBIT[name])
             for name, inst in INSTANCES.items()}


def ml_name(name: str) -> str:
    """An instance type's SageMaker name: ``g5.xlarge`` and ``ml.g5.xlarge`` are one type.

    >>> ml_name("g5.xlarge"), ml_name("ml.g5.xlarge")
    ('ml.g5.xlarge', 'ml.g5.xlarge')
    """
    return name if name.startswith("ml.") else f"ml.{name}"


def get_instance(name: str) -> InstanceType:
    """Look up an instance type by its SageMaker name (``ml.`` prefix optional)."""
    key = ml_name(name)
    try:
        return INSTANCES[key]
    except KeyError:
        from lmikit.errors import CatalogError

        close = _close_matches(key, INSTANCES)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise CatalogError(
            f"instance type {name!r} is not in the catalog.{hint} Known GPU instance types: "
            + ", ".join(sorted(INSTANCES))
        ) from None


def _close_matches(word: str, options: Mapping[str, object]) -> list[str]:
    import difflib

    return difflib.get_close_matches(word, list(options), n=3, cutoff=0.75)
