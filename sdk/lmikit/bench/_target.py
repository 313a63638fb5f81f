"""What a deployed endpoint runs, read back from SageMaker for a ``lmikit bench`` file.

A bench file is evidence only for the deployment it was measured on, so ``lmikit bench
ENDPOINT --output`` records the model, instance type, TP and KV-cache tier the endpoint runs,
as ``lmikit plan``/``simulate --calibrate`` check them; a spec target records its plan's. Each
comes from the describe calls botocore's SageMaker model defines:

- the base inference component (DescribeInferenceComponent): its variant (``VariantName``),
  GPUs per copy (``Specification.ComputeResourceRequirements.
  NumberOfAcceleratorDevicesRequired``, which lmikit renders as the TP degree) and its
  container environment (``Specification.Container.Environment``, or the environment of the
  SageMaker Model it names, DescribeModel);
- the endpoint (DescribeEndpoint -> ``EndpointConfigName``) and its configuration
  (DescribeEndpointConfig -> ``ProductionVariants[].InstanceType``; for an endpoint without
  inference components, also the variant's ``ModelName``);
- from that environment: the model (``LMIKIT_MODEL_ID``, which lmikit writes for every
  component, else ``OPTION_MODEL_ID`` or ``HF_MODEL_ID``), the TP degree where the component
  does not say (``OPTION_TENSOR_PARALLEL_DEGREE``), the tier and chunk size (``LMIKIT_PLAN``,
  lmikit's image; else LMCache's own ``LMCACHE_*`` variables; no LMCache setting at all:
  ``off``). An LMCache file inside the model artifact cannot be read from here: its tier
  stays unknown.

>>> tier_from_environment({"LMIKIT_PLAN": '{"tier": "cpu+disk", "chunk_size": 256}'})
('cpu+disk', 256)
>>> tier_from_environment({"LMCACHE_REMOTE_URL": "redis://cache:6379"})
('remote', None)
>>> tier_from_environment({"PYTHONHASHSEED": "0"}), tier_from_environment({})
(('off', None), (None, None))
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lmikit.errors import LmikitError
from lmikit.lora import lmcache_in_environment
from lmikit.names import MODEL_ID_ENV


@dataclass(frozen=True)
class Identity:
    """What a bench ran on; None where it could not be read (``problems`` says why)."""

    model: str | None = None
    instance: str | None = None
    tp: int | None = None
    kv_cache: str | None = None
    chunk_size: int | None = None
    problems: list[str] = field(default_factory=list)


def endpoint_identity(sm: Any, endpoint: str, component: str) -> Identity:
    """The model, instance type, TP degree, KV-cache tier and chunk size ``endpoint`` serves
    ``component`` (its base inference component) with. ``sm``: a SageMaker client."""
    from lmikit import aws

    problems: list[str] = []
    env: dict[str, str] = {}
    variant = tp = None
    try:
        ic = aws.describe(sm, "inference-component", component)
    except LmikitError as exc:
        ic, problems = None, [f"cannot describe inference component {component}: {exc}"]
    try:
        if ic is not None:
            variant = ic.get("VariantName")
            need = (ic.get("Specification", {}).get("ComputeResourceRequirements", {})
                    .get("NumberOfAcceleratorDevicesRequired"))
            tp = int(need) if isinstance(need, int | float) and need >= 1 \
                and float(need).is_integer() else None
            env = aws.component_environment(sm, ic)
        desc = aws.describe(sm, "endpoint", endpoint) or {}
        config = aws.describe(sm, "endpoint-config", desc.get("EndpointConfigName", "")) \
            if desc.get("EndpointConfigName") else None
        rows = (config or {}).get("ProductionVariants") or []
        row = next((v for v in rows if v.get("VariantName") == variant), rows[0] if rows else {})
        instance = row.get("InstanceType")
        if ic is None and row.get("ModelName"):
            model = aws.describe(sm, "model", row["ModelName"]) or {}
            env = dict(model.get("PrimaryContainer", {}).get("Environment", {}))
    except LmikitError as exc:
        instance = None
        problems.append(f"cannot describe endpoint {endpoint}: {exc}")
    model_id = env.get(MODEL_ID_ENV) or env.get("OPTION_MODEL_ID") or env.get("HF_MODEL_ID")
    if tp is None:
        tp = _whole(env.get("OPTION_TENSOR_PARALLEL_DEGREE")) \
            or _whole(_plan(env).get("tp"))
    tier, chunk = tier_from_environment(env)
    missing = [name for name, value in (("model", model_id), ("instance", instance), ("tp", tp),
                                        ("kv_cache", tier)) if value is None]
    if missing and not problems:
        problems.append(f"{endpoint}'s description does not say its {', '.join(missing)}")
    return Identity(model_id, instance, tp, tier, chunk, problems)


def tier_from_environment(env: dict[str, str]) -> tuple[str | None, int | None]:
    """(kv_cache mode, LMCache chunk size) a container environment runs with; the mode is
    None where LMCache is on but its tiers are set in a file, or the environment is empty."""
    plan = _plan(env)
    chunk = _whole(plan.get("chunk_size")) or _whole(env.get("LMCACHE_CHUNK_SIZE"))
    if isinstance(plan.get("tier"), str):
        return {"none": "off"}.get(plan["tier"], plan["tier"]), chunk
    if env.get("LMCACHE_REMOTE_URL"):
        return "remote", chunk
    if env.get("LMCACHE_LOCAL_DISK"):
        return "cpu+disk", chunk
    if env.get("LMCACHE_MAX_LOCAL_CPU_SIZE") or env.get("LMCACHE_LOCAL_CPU") == "true":
        return "cpu", chunk
    if not env or lmcache_in_environment(env):
        return None, chunk
    return "off", chunk


def _plan(env: dict[str, str]) -> dict[str, Any]:
    try:
        plan = json.loads(env.get("LMIKIT_PLAN") or "{}")
    except ValueError:
        return {}
    return plan if isinstance(plan, dict) else {}


def _whole(value: Any) -> int | None:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None
