"""Does one model copy fit an instance, and if not, what would.

A copy fits when vLLM has kernels for the model on the instance's GPUs (the hardware rows
of :mod:`lmikit.catalog`) and its GPUs hold the weights, the runtime overhead
and the KV cache of what it must serve at once: one typical request, or
``engine.max_model_len`` tokens when the spec sets it (vLLM refuses to start when the KV
cache cannot hold one sequence of ``max_model_len``). Pure, standard library only.

>>> from lmikit.catalog import get_instance
>>> from lmikit.catalog import get_model
>>> ds = get_model("deepseek-ai/DeepSeek-V3.2")
>>> need = Need(tokens=10_000, what="one typical request (workload.typical_request_tokens)")
>>> [f"{x.instance.name} TP {x.tp}" for x in layouts_that_hold(ds, ds.weight_bytes, need)][:2]
['ml.p6-b200.48xlarge TP 4', 'ml.p5e.48xlarge TP 8']
>>> check_holds(ds, get_instance("ml.p5.48xlarge"), tp=8, weight_bytes=ds.weight_bytes,
...             need=need)
Traceback (most recent call last):
...
lmikit.errors.PlanError: deepseek-ai/DeepSeek-V3.2 does not fit ml.p5.48xlarge at ...
"""

from __future__ import annotations

from dataclasses import dataclass

from lmikit import sizing
from lmikit.catalog import INSTANCES, VLLM_VERSION, InstanceType, ModelGeometry, unsupported_by
from lmikit.errors import PlanError

TP_DEGREES = (1, 2, 4, 8)
HINTS_SHOWN = 3


@dataclass(frozen=True)
class Need:
    """KV tokens one copy must hold, and what they are for (said in errors)."""

    tokens: int
    what: str
    max_model_len: bool = False  # the tokens are engine.max_model_len (lowering it helps)


@dataclass(frozen=True)
class Layout:
    """An instance type and the smallest tensor-parallel degree at which a copy fits it."""

    instance: InstanceType
    tp: int
    kv_tokens: int

    def describe(self) -> str:
        gpu = self.instance.gpu
        return (f"{self.instance.name} ({self.instance.gpu_count} x {gpu.name}, "
                f"engine.tensor_parallel_degree {self.tp}: {self.kv_tokens} tokens of KV)")


def tp_degrees(geometry: ModelGeometry, gpus: int) -> list[int]:
    """Tensor-parallel degrees vLLM accepts for the model (they divide its attention heads)
    within ``gpus``."""
    return [t for t in TP_DEGREES if t <= gpus and geometry.num_attention_heads % t == 0]


def kv_capacity(geometry: ModelGeometry, instance: InstanceType, tp: int, weight_bytes: int,
                kv_dtype_bytes: int = 2, gpu_memory_utilization: float = 0.9) -> int:
    """Tokens of KV one copy holds on ``tp`` of the instance's GPUs after weights and overhead."""
    return sizing.gpu_kv_capacity_tokens(
        instance.gpu.memory_gib, gpu_memory_utilization, tp, weight_bytes,
        geometry.gpu_kv_bytes_per_token(kv_dtype_bytes), geometry.kv_replication(tp))


def layouts_that_hold(geometry: ModelGeometry, weight_bytes: int, need: Need, *,
                      kv_dtype_bytes: int = 2, gpu_memory_utilization: float = 0.9,
                      copies: int = 1) -> list[Layout]:
    """Catalog instance types whose GPUs run the model and hold ``need``, each at its smallest
    TP degree; the least GPU memory first, one instance type per GPU model and TP degree."""
    best: dict[tuple[str, int], Layout] = {}
    for inst in INSTANCES.values():
        if unsupported_by(geometry, inst.gpu):
            continue
        for tp in tp_degrees(geometry, inst.gpu_count // copies):
            tokens = kv_capacity(geometry, inst, tp, weight_bytes, kv_dtype_bytes,
                                 gpu_memory_utilization)
            if tokens >= need.tokens:
                key = (inst.gpu.name, tp)
                seen = best.get(key)
                if seen is None or (inst.gpu_count, inst.host_memory_gib, inst.name) < (
                        seen.instance.gpu_count, seen.instance.host_memory_gib,
                        seen.instance.name):
                    best[key] = Layout(inst, tp, tokens)
                break
    return sorted(best.values(), key=lambda x: (x.tp * x.instance.gpu.memory_gib,
                                                x.instance.gpu_count, x.instance.name))


def check_holds(geometry: ModelGeometry, instance: InstanceType, *, tp: int, weight_bytes: int,
                need: Need, kv_dtype_bytes: int = 2, gpu_memory_utilization: float = 0.9,
                copies: int = 1) -> int:
    """The copy's KV capacity in tokens; a PlanError naming the model, its weights, the
    instance's GPUs and what would fit when vLLM cannot run it there or it does not fit."""
    others = layouts_that_hold(geometry, weight_bytes, need, kv_dtype_bytes=kv_dtype_bytes,
                               gpu_memory_utilization=gpu_memory_utilization, copies=copies)
    elsewhere = ("instance types that hold it: "
                 + "; ".join(x.describe() for x in others[:HINTS_SHOWN]) if others
                 else "no catalog instance type holds it at this gpu_memory_utilization")
    gpu = instance.gpu
    row = unsupported_by(geometry, gpu)
    if row is not None:
        majors = " or ".join(f"{m}.x" for m in row.compute_capability_majors)
        raise PlanError(
            f"{geometry.model_id} uses {row.what}, which vLLM {VLLM_VERSION} runs only on GPUs "
            f"of compute capability {majors} ({row.why}); {instance.name} has {gpu.name} "
            f"({gpu.compute_capability[0]}.{gpu.compute_capability[1]}). Choose one of the "
            + elsewhere)
    tokens = kv_capacity(geometry, instance, tp, weight_bytes, kv_dtype_bytes,
                         gpu_memory_utilization)
    if tokens >= need.tokens:
        return tokens
    fixes = [f"raise engine.tensor_parallel_degree to {x.tp} ({x.kv_tokens} tokens of KV)"
             for x in others if x.instance.name == instance.name][:1]
    if need.max_model_len and tokens > 0:
        fixes.append("lower engine.max_model_len to at most "
                     f"{sizing.default_max_model_len(need.tokens, tokens)}")
    fixes.append(f"choose one of the {elsewhere}" if others else elsewhere)
    room = f"KV room for {tokens} tokens" if tokens > 0 else "no room for KV"
    raise PlanError(
        f"{geometry.model_id} does not fit {instance.name} at engine.tensor_parallel_degree "
        f"{tp}: its weights take {weight_bytes / sizing.GIB:.1f} GiB, and {tp} x {gpu.name} "
        f"({gpu.memory_gib:g} GiB each; {instance.gpu_count} on the instance, "
        f"{instance.total_gpu_memory_gib:g} GiB) at gpu_memory_utilization "
        f"{gpu_memory_utilization:g}, less {sizing.GPU_RUNTIME_OVERHEAD_GIB:g} GiB of runtime "
        f"per GPU, leave {room} where {need.what} needs {need.tokens} tokens. Fix: "
        + "; or ".join(fixes))
