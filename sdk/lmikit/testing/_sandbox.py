"""``sandbox()``: the sandbox in-process, for notebooks and scripts.

>>> from lmikit.testing import sandbox
>>> with sandbox() as sb:  # doctest: +SKIP
...     boto3.client("sagemaker").list_endpoints()["Endpoints"]
[]
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from lmikit.testing._control import Timings
from lmikit.testing._server import (
    ENV_KEYS,
    Sandbox,
    SandboxError,
    free_port_pair,
    start_sandbox,
)

FAST_TIMINGS = Timings(endpoint_create=1.0, endpoint_update=1.0, component_create=1.0,
                       component_update=1.0, adapter_create=0.5, delete=0.5)
# Variables that would send boto3 elsewhere or pair real credentials with the sandbox's.
_CLEARED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
            "AWS_ENDPOINT_URL", "AWS_REGION")


@contextlib.contextmanager
def sandbox(*, region: str = "us-east-1", host: str = "127.0.0.1",
            timings: Timings | None = None, ttft_seconds: float = 0.0,
            token_seconds: float = 0.0, compute_scale: float = 1.0) -> Iterator[Sandbox]:
    """Start the fake SageMaker and moto on free ports, point boto3 at them, and on exit
    stop both and put the environment (and boto3's default session) back as it was.

    Inside the block every boto3 client and session made without explicit endpoints, and
    so the lmikit SDK and CLI, talk to the sandbox with dummy credentials. ``timings`` are
    the seconds resources take to become InService (fast by default); ``ttft_seconds`` and
    ``token_seconds`` add to the cache model's engine-modelled time to first token and give
    the time per generated token; ``compute_scale`` scales the engine-modelled times.
    """
    import boto3

    port = free_port_pair(host)
    if port is None:
        raise SandboxError(f"no free pair of ports on {host}")
    saved = {k: os.environ.get(k) for k in (*ENV_KEYS, *_CLEARED)}
    saved_session = boto3.DEFAULT_SESSION
    sb = None
    try:
        for key in _CLEARED:
            os.environ.pop(key, None)
        boto3.DEFAULT_SESSION = None
        sb = start_sandbox(host, port, region=region, timings=timings or FAST_TIMINGS,
                           token_seconds=token_seconds, ttft_seconds=ttft_seconds)
        sb.fake.runtime.compute_scale = compute_scale
        os.environ.update(sb.env())
        boto3.DEFAULT_SESSION = None
        yield sb
    finally:
        if sb is not None:
            sb.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        boto3.DEFAULT_SESSION = saved_session
