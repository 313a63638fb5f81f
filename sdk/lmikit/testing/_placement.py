"""Which instance each copy of a base component runs on, for the fake's session routing.

SageMaker allocates every copy its ``ComputeResourceRequirements`` on one instance (botocore
``InferenceComponentComputeResourceRequirements``: the accelerators, CPU cores and memory "to
allocate to run a model"), so an instance holds as many copies as its GPUs, vCPUs and memory
allow. The fake fills the variant's instances in order (first fit; SageMaker documents no
default ``PlacementStrategy``), from lmikit's instance catalog. A session is pinned to an
instance (botocore ``InvokeEndpoint.SessionId``: "routes the request to the same instance
that supports the session"); which copy on it serves the request is not documented, so the
fake's runtime lets any of them answer.
"""

from __future__ import annotations

from typing import Any

from lmikit.errors import CatalogError


def copy_instances(base: dict[str, Any], instance_type: str, instances: int) -> list[int]:
    """The instance (0-based) of each copy of the base component request ``base``, on
    ``instances`` instances of ``instance_type``; copies with no room anywhere go round-robin
    (SageMaker would leave them pending; the fake still serves them)."""
    from lmikit.catalog import get_instance

    copies = int((base.get("RuntimeConfig") or {}).get("CopyCount", 1))
    need = base["Specification"].get("ComputeResourceRequirements") or {}
    instances = max(1, instances)
    try:
        inst = get_instance(instance_type)
    except CatalogError:
        return [i % instances for i in range(copies)]
    free = [[float(inst.gpu_count), float(inst.vcpus), inst.host_memory_gib * 1024]
            for _ in range(instances)]
    want = [float(need.get("NumberOfAcceleratorDevicesRequired") or 0),
            float(need.get("NumberOfCpuCoresRequired") or 0),
            float(need.get("MinMemoryRequiredInMb") or 0)]
    placed = []
    for copy in range(copies):
        where = next((i for i, room in enumerate(free)
                      if all(r >= w for r, w in zip(room, want, strict=True))), None)
        if where is None:
            where = copy % instances
        else:
            free[where] = [r - w for r, w in zip(free[where], want, strict=True)]
        placed.append(where)
    return placed
