"""lmikit: LMCache-enabled LLM serving on Amazon SageMaker from one YAML spec.

>>> from lmikit import Deployment, Endpoint, load_spec, plan_spec
>>> spec = load_spec("examples/docqa-qwen7b.yaml")  # doctest: +SKIP
>>> plan_spec(spec).tier  # doctest: +SKIP
'cpu'
>>> Deployment(spec, role_arn=role).deploy()  # doctest: +SKIP
>>> Endpoint(spec.name, region=spec.region).invoke("Hello")  # doctest: +SKIP

Names are imported lazily so ``import lmikit`` (and the CLI) stays fast; each package's face
(``lmikit.client``, ``lmikit.render``, ...) does the same with :func:`_lazy_face`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AdapterError": "lmikit.errors",
    "CatalogError": "lmikit.errors",
    "DeployError": "lmikit.errors",
    "Deployment": "lmikit.deploy",
    "DeploymentSpec": "lmikit.spec",
    "Endpoint": "lmikit.client",
    "InvokeError": "lmikit.errors",
    "LmikitError": "lmikit.errors",
    "Plan": "lmikit.planner",
    "PlanError": "lmikit.errors",
    "RenderError": "lmikit.errors",
    "Resolved": "lmikit.resolve",
    "SpecError": "lmikit.errors",
    "WaitTimeout": "lmikit.errors",
    "advise": "lmikit.advisor",
    "get_instance": "lmikit.catalog",
    "get_model": "lmikit.catalog",
    "lmcache_config": "lmikit.render",
    "lmi_environment": "lmikit.render",
    "load_spec": "lmikit.spec",
    "load_spec_text": "lmikit.spec",
    "openai_client": "lmikit.client",
    "plan": "lmikit.planner",
    "plan_spec": "lmikit.planner",
    "render_lmcache_yaml": "lmikit.render",
    "render_requests": "lmikit.render",
    "resolve_spec": "lmikit.resolve",
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
    "Resolved",
    "SpecError",
    "WaitTimeout",
    "advise",
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
    "resolve_spec",
]


def _lazy_face(package: str, exports: dict[str, str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the face of ``package``: each name of ``exports``
    (name -> the module that defines it) is imported on its first use, then kept."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return getattr_, dir_


__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from lmikit.advisor import advise
    from lmikit.catalog import get_instance, get_model
    from lmikit.client import Endpoint, openai_client
    from lmikit.deploy import Deployment
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
    from lmikit.planner import Plan, plan, plan_spec
    from lmikit.render import lmcache_config, lmi_environment, render_lmcache_yaml, render_requests
    from lmikit.resolve import Resolved, resolve_spec
    from lmikit.spec import DeploymentSpec, load_spec, load_spec_text
