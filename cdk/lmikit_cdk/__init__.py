"""CDK constructs for lmikit deployments (install with ``pip install 'lmikit[cdk]'``).

>>> from lmikit_cdk import LmiStack  # doctest: +SKIP
>>> LmiStack.from_file(app, "examples/docqa-qwen7b.yaml")  # doctest: +SKIP
"""

from lmikit._extras import require

# without the cdk extra: one line naming it (lmikit.errors.MissingPackage), not a traceback
require("aws_cdk", "lmikit_cdk")
require("constructs", "lmikit_cdk")
require("cdk_nag", "lmikit_cdk")

from lmikit_cdk.adapter import LoraAdapter  # noqa: E402
from lmikit_cdk.app import build_app  # noqa: E402
from lmikit_cdk.endpoint import LmiEndpoint, validate_for_cdk  # noqa: E402
from lmikit_cdk.image import LmiImage, container_code_reasons  # noqa: E402
from lmikit_cdk.nag import add_nag_checks, nag_packs  # noqa: E402
from lmikit_cdk.observability import LmiObservability  # noqa: E402
from lmikit_cdk.scaling import CopyCountScaling  # noqa: E402
from lmikit_cdk.stack import LmiStack  # noqa: E402

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
