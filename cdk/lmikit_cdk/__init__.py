"""CDK constructs for lmikit deployments (install with ``pip install 'lmikit[cdk]'``).

>>> from lmikit_cdk import LmiStack  # doctest: +SKIP
>>> LmiStack.from_file(app, "examples/docqa-qwen7b.yaml")  # doctest: +SKIP
"""

from lmikit_cdk.adapter import LoraAdapter
from lmikit_cdk.app import build_app
from lmikit_cdk.endpoint import LmiEndpoint, validate_for_cdk
from lmikit_cdk.image import LmiImage, container_code_reasons
from lmikit_cdk.nag import add_nag_checks, nag_packs
from lmikit_cdk.observability import LmiObservability
from lmikit_cdk.scaling import CopyCountScaling
from lmikit_cdk.stack import LmiStack

__all__ = [
    "CopyCountScaling",
    "LmiEndpoint",
    "LmiImage",
    "LmiObservability",
    "LmiStack",
    "LoraAdapter",
    "add_nag_checks",
    "build_app",
    "container_code_reasons",
    "nag_packs",
    "validate_for_cdk",
]
