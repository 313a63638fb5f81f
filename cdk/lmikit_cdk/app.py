"""The CDK app: one :class:`LmiStack` per spec named by the ``spec`` context.

``cdk synth`` uses ``cdk.json``'s default spec; ``-c spec=a.yaml,b.yaml`` picks others
(comma-separated; paths relative to the working directory). ``-c lmikit:image=stock``
forces the stock LMI image, ``-c lmikit:nag=false`` skips the cdk-nag packs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk

from lmikit.errors import RenderError
from lmikit_cdk.nag import add_nag_checks
from lmikit_cdk.stack import LmiStack

DEFAULT_SPEC = "examples/docqa-qwen7b.yaml"
SPEC_CONTEXT = "spec"
IMAGE_CONTEXT = "lmikit:image"
NAG_CONTEXT = "lmikit:nag"


def spec_paths(value: Any) -> list[Path]:
    """Spec paths from the context value: a comma-separated string or a list."""
    if value is None or value == "":
        return [Path(DEFAULT_SPEC)]
    items = value if isinstance(value, list) else str(value).split(",")
    paths = [Path(str(item).strip()) for item in items if str(item).strip()]
    if not paths:
        raise RenderError(f"context {SPEC_CONTEXT!r} names no spec file")
    return paths


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return str(value).strip().lower() not in ("false", "0", "no", "off")


def build_app(app: cdk.App | None = None, *, build_context: str | Path | None = None) -> cdk.App:
    """Add one stack per spec to ``app`` (a new App by default) and the nag checks."""
    app = app or cdk.App()
    node = app.node
    root = Path(build_context) if build_context else Path.cwd()
    image_mode = node.try_get_context(IMAGE_CONTEXT) or "auto"
    seen: dict[str, Path] = {}
    for path in spec_paths(node.try_get_context(SPEC_CONTEXT)):
        stack = LmiStack.from_file(app, path, image_mode=image_mode, build_context=root)
        if stack.spec.name in seen:
            raise RenderError(f"{path} and {seen[stack.spec.name]} both name the deployment "
                              f"{stack.spec.name!r}; spec names must be unique")
        seen[stack.spec.name] = path
    if _flag(node.try_get_context(NAG_CONTEXT), True):
        add_nag_checks(app)
    return app
