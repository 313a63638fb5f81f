"""The resolve step: every decision the renderers and the deployer derive from (spec, plan,
image kind), made once into one immutable :class:`Resolved` that each of them reads.

>>> from lmikit.resolve import resolve_spec  # doctest: +SKIP
>>> resolve_spec(spec, plan_spec(spec)).weights_source  # doctest: +SKIP
'hub'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "CostEstimate": "lmikit.resolve._cost",
    "DECODE_TOKENS_PER_S_ASSUMED": "lmikit.resolve._cost",
    "Resolved": "lmikit.resolve._resolve",
    "plan_cost": "lmikit.resolve._cost",
    "resolve_spec": "lmikit.resolve._resolve",
}

__all__ = [
    "CostEstimate",
    "DECODE_TOKENS_PER_S_ASSUMED",
    "Resolved",
    "plan_cost",
    "resolve_spec",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.resolve._cost import DECODE_TOKENS_PER_S_ASSUMED, CostEstimate, plan_cost
    from lmikit.resolve._resolve import Resolved, resolve_spec
