"""The one acceptance path: load a spec file, plan it, check the files it names and render
every target it is for. ``lmikit validate``, ``render``, ``plan`` and ``deploy`` all call
:func:`accept_spec`, so they cannot disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "Accepted": "lmikit.accept._accept",
    "DEPLOY_TARGETS": "lmikit.accept._accept",
    "IMAGE_TARGETS": "lmikit.accept._accept",
    "RenderOptions": "lmikit.accept._accept",
    "TARGETS": "lmikit.accept._accept",
    "accept_spec": "lmikit.accept._accept",
    "render_target": "lmikit.accept._accept",
}

__all__ = [
    "Accepted",
    "DEPLOY_TARGETS",
    "IMAGE_TARGETS",
    "RenderOptions",
    "TARGETS",
    "accept_spec",
    "render_target",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.accept._accept import (
        DEPLOY_TARGETS,
        IMAGE_TARGETS,
        TARGETS,
        Accepted,
        RenderOptions,
        accept_spec,
        render_target,
    )
