"""The decisions a renderer reads: the :class:`lmikit.resolve.Resolved` its caller made once,
or, for a direct call without one, those of (spec, plan, image kind) made here."""

from __future__ import annotations

from lmikit.catalog import ImageKind, PriceTable
from lmikit.planner import Plan
from lmikit.resolve import Resolved, resolve_spec
from lmikit.spec import DeploymentSpec


def resolved_for(spec: DeploymentSpec, plan: Plan, image: ImageKind | None,
                 resolved: Resolved | None, hourly_price: float | None = None,
                 prices: PriceTable | None = None) -> Resolved:
    """``resolved`` when given (it must be for ``image``; ``None``: a decision no image kind
    changes, so any will do), else (spec, plan, image or the stock one) resolved (the planned
    cost priced from ``hourly_price`` or ``prices``, as given)."""
    if resolved is None:
        return resolve_spec(spec, plan, image_kind=image or "stock",
                            hourly_price=hourly_price, prices=prices)
    if image is not None and resolved.image_kind != image:
        raise ValueError(f"the decisions given were resolved for the {resolved.image_kind!r} "
                         f"image, but {image!r} is rendered: resolve with "
                         f"image_kind={image!r}")
    return resolved
