"""lmikit: LMCache-enabled LLM serving on Amazon SageMaker from one YAML spec.

>>> from lmikit import Deployment, Endpoint, load_spec, plan_spec
>>> spec = load_spec("examples/docqa-qwen7b.yaml")  # doctest: +SKIP
>>> plan_spec(spec).tier  # doctest: +SKIP
'cpu'
>>> Deployment(spec, role_arn=role).deploy()  # doctest: +SKIP
>>> Endpoint(spec.name, region=spec.region).invoke("Hello")  # doctest: +SKIP

Names are imported lazily so ``import lmikit`` (and the CLI) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AdapterError": "lmikit.errors",
    "CatalogError": "lmikit.errors",
    "DeployError": "lmikit.errors",
    "Deployment": "lmikit.deploy",
    "DeploymentSpec": "lmikit.spec",
    "Endpoint": "lmikit.endpoint",
    "InvokeError": "lmikit.errors",
    "LmikitError": "lmikit.errors",
    "Plan": "lmikit.plan",
    "PlanError": "lmikit.errors",
    "RenderError": "lmikit.errors",
    "SpecError": "lmikit.errors",
    "WaitTimeout": "lmikit.errors",
    "get_instance": "lmikit.catalog.instances",
    "get_model": "lmikit.catalog.models",
    "lmcache_config": "lmikit.render.lmcache",
    "lmi_environment": "lmikit.render.env",
    "load_spec": "lmikit.loader",
    "load_spec_text": "lmikit.loader",
    "openai_client": "lmikit.openai_compat",
    "plan": "lmikit.plan",
    "plan_spec": "lmikit.plan",
    "render_lmcache_yaml": "lmikit.render.lmcache",
    "render_requests": "lmikit.render.sagemaker",
}

__all__ = [
    "AdapterError",
    "CatalogError",
    "DeployError",
    "Deployment",
    "DeploymentSpec",
    "Endpoint",
    "InvokeError",
    "LmikitError",
    "Plan",
    "PlanError",
    "RenderError",
    "SpecError",
    "WaitTimeout",
    "get_instance",
    "get_model",
    "lmcache_config",
    "lmi_environment",
    "load_spec",
    "load_spec_text",
    "openai_client",
    "plan",
    "plan_spec",
    "render_lmcache_yaml",
    "render_requests",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lmikit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # pragma: no cover
    from lmikit.catalog.instances import get_instance
    from lmikit.catalog.models import get_model
    from lmikit.deploy import Deployment
    from lmikit.endpoint import Endpoint
    from lmikit.errors import (
        AdapterError,
        CatalogError,
        DeployError,
        InvokeError,
        LmikitError,
        PlanError,
        RenderError,
        SpecError,
        WaitTimeout,
    )
    from lmikit.loader import load_spec, load_spec_text
    from lmikit.openai_compat import openai_client
    from lmikit.plan import Plan, plan, plan_spec
    from lmikit.render.env import lmi_environment
    from lmikit.render.lmcache import lmcache_config, render_lmcache_yaml
    from lmikit.render.sagemaker import render_requests
    from lmikit.spec import DeploymentSpec
