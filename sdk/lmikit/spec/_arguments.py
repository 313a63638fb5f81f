"""What-if arguments checked as the spec checks the fields they stand for.

``lmikit.plan`` and ``lmikit.sim.deployment`` take, as Python arguments, what a spec
says in fields (``chunk_size`` is ``kv_cache.chunk_size``, ``tp`` is
``engine.tensor_parallel_degree``...). Each argument is validated by its field's own type and
bounds (:mod:`lmikit.spec`, strict: no ``"64"`` for 64, no 8.5 batch size), so a notebook
gets the spec's limits and a :class:`lmikit.errors.PlanError` that names the argument, the
value and what is valid, instead of a wrong number or an error from deep inside.

>>> for argument, value in (("chunk_size", 0), ("kv_cache_dtype", "fp9")):
...     try:
...         check(argument, value)
...     except PlanError as exc:
...         print(exc)
chunk_size is 0; expected greater than or equal to 16 (the spec's kv_cache.chunk_size)
kv_cache_dtype is 'fp9'; expected 'auto' or 'fp8' (the spec's engine.kv_cache_dtype)
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from lmikit.errors import PlanError, safe_repr

# argument -> (spec section, field)
FIELDS = {
    "tp": ("engine", "tensor_parallel_degree"),
    "copies": ("instance", "copies_per_instance"),
    "chunk_size": ("kv_cache", "chunk_size"),
    "gpu_memory_utilization": ("engine", "gpu_memory_utilization"),
    "kv_cache_dtype": ("engine", "kv_cache_dtype"),
    "max_batch_size": ("engine", "max_batch_size"),
    "max_model_len": ("engine", "max_model_len"),
    "weight_dtype": ("model", "dtype"),
    "mode": ("kv_cache", "mode"),
    "cpu_size_gb": ("kv_cache", "cpu_size_gb"),
    "disk_size_gb": ("kv_cache", "disk_size_gb"),
    "prefix_length": ("routing", "prefix_length"),
    "concurrency_threshold": ("routing", "concurrency_threshold"),
}


@cache
def _adapter(section: str, name: str) -> Any:
    from pydantic import TypeAdapter

    from lmikit.spec._model import DeploymentSpec

    model = DeploymentSpec.model_fields[section].annotation
    info = model.model_fields[name]  # type: ignore[union-attr]
    if not info.metadata:
        return TypeAdapter(info.annotation)
    return TypeAdapter(Annotated[(info.annotation, *info.metadata)])  # type: ignore[arg-type]


def check(argument: str, value: Any) -> None:
    """Refuse ``value`` for ``argument`` unless its spec field would take it."""
    from pydantic import ValidationError

    section, name = FIELDS[argument]
    try:
        _adapter(section, name).validate_python(value, strict=True)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"])
        for lead in ("Input should be ", "Value error, ", "must be "):
            if message.startswith(lead):
                message = message[len(lead):]
        raise PlanError(f"{argument} is {safe_repr(value)}; expected {message} (the spec's "
                        f"{section}.{name})") from None


def check_arguments(arguments: dict[str, Any]) -> None:
    """:func:`check` each argument that stands for a spec field."""
    for argument, value in arguments.items():
        if argument in FIELDS:
            check(argument, value)
