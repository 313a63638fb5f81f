"""Test doubles shipped with lmikit: a strict fake SageMaker and clocks.

Like httpx's ``MockTransport``, the fake is the official way to test code that deploys or
invokes with lmikit, without an AWS account::

    from lmikit.testing import FakeSageMaker, VirtualClock
    fake = FakeSageMaker(clock=VirtualClock())
    session = fake.install(boto3.Session(region_name="us-east-1"))

Every request is checked against botocore's service model (enums, patterns and maximum
lengths included); resources move through Creating -> InService on the clock; faults are
injected with :meth:`FakeSageMaker.inject`; with :func:`iam_role_reads` a component whose
artifact its endpoint's execution role may not read ends Failed, as on SageMaker.
:class:`FakePriceList` answers the AWS Price List Query API the same way, for
``lmikit prices fetch``.
"""

from lmikit.testing._adapters import lora_tensors, safetensors_bytes, write_lora_adapter
from lmikit.testing._cache import cloudwatch_sink
from lmikit.testing._clock import SystemClock, VirtualClock
from lmikit.testing._control import ServiceError, Timings
from lmikit.testing._fake import (
    SUPPORTED_OPERATIONS,
    Call,
    FakeSageMaker,
    Fault,
    s3_artifact_exists,
)
from lmikit.testing._iam import iam_actions, iam_policy_problems, unknown_actions
from lmikit.testing._metrics import CacheModel, s3_artifact_reader
from lmikit.testing._pricing import FakePriceList
from lmikit.testing._role_access import iam_role_reads
from lmikit.testing._sandbox import sandbox
from lmikit.testing._validate import ShapeValidator, compile_java_pattern

__all__ = [
    "SUPPORTED_OPERATIONS",
    "CacheModel",
    "Call",
    "FakePriceList",
    "FakeSageMaker",
    "Fault",
    "ServiceError",
    "ShapeValidator",
    "SystemClock",
    "Timings",
    "VirtualClock",
    "compile_java_pattern",
    "cloudwatch_sink",
    "iam_actions",
    "iam_policy_problems",
    "iam_role_reads",
    "lora_tensors",
    "s3_artifact_exists",
    "s3_artifact_reader",
    "sandbox",
    "safetensors_bytes",
    "unknown_actions",
    "write_lora_adapter",
]
