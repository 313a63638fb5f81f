"""Shared fixtures: example specs, golden-file comparison, and an AWS-free environment."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import botocore.loaders
import botocore.session
import pytest
import yaml
from hypothesis import settings

settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile("deep", max_examples=5000, deadline=None)
settings.register_profile("fast", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Each new botocore session re-reads and re-parses the service models it needs (0.25-0.4 s a
# client). They are read-only data, so one loader per data path serves every session of the
# test process: real boto3, moto and the fake SageMaker alike.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


def pytest_configure(config: pytest.Config) -> None:
    """The fast tier (``-m "not slow"``) tries 25 examples a property, CI's run 200, unless
    HYPOTHESIS_PROFILE names a profile."""
    if "not slow" in (config.option.markexpr or "") and "HYPOTHESIS_PROFILE" not in os.environ:
        settings.load_profile("fast")


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden"
EXAMPLE_SPECS = sorted(EXAMPLES.glob("*.yaml"))
DEFAULT_SPEC = EXAMPLES / "docqa-qwen7b.yaml"
HYPERPOD_CRD_PATHS = tuple(folder / "schemas" / "hyperpod-inferenceendpointconfig-crd.yaml"
                           for folder in (ROOT.parent / "shared", ROOT / "tests"))


@functools.cache
def hyperpod_crd() -> dict[str, Any] | None:
    """The HyperPod operator's InferenceEndpointConfig CRD (the first of HYPERPOD_CRD_PATHS that
    exists, else None), parsed once per process, by libyaml where it is installed (0.05 s
    against 0.4 s for its 456 kB). Callers read it and never change it."""
    path = next((p for p in HYPERPOD_CRD_PATHS if p.exists()), None)
    if path is None:
        return None
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def hyperpod_crd_v1() -> dict[str, Any]:
    """The CRD's v1 ``openAPIV3Schema``; the calling test is skipped where the CRD is absent."""
    crd = hyperpod_crd()
    if crd is None:
        pytest.skip("the HyperPod CRD schema is not available")
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"][
        "openAPIV3Schema"]


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach AWS: fake credentials, no profile, a fixed region."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def lmcache_would_track_usage(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> bool:
    """LMCache's own answer (``usage_telemetry/identity.py is_usage_tracking_enabled``) to
    whether a process with ``env``'s telemetry switches would send usage messages. The module
    is loaded from its file: the package's ``__init__`` needs py-cpuinfo, absent here."""
    import importlib.util
    import sys

    import lmcache

    name = "lmcache_usage_identity"
    module = sys.modules.get(name)
    if module is None:
        path = Path(lmcache.__file__).parent / "usage_telemetry" / "identity.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it loads
        spec.loader.exec_module(module)
    for switch in ("LMCACHE_TRACK_USAGE", "DO_NOT_TRACK"):
        if switch in env:
            monkeypatch.setenv(switch, env[switch])
        else:
            monkeypatch.delenv(switch, raising=False)
    return bool(module.is_usage_tracking_enabled())


def compiled_by_mypyc(module: str) -> bool:
    """Whether this install runs ``module`` as a C extension (a wheel's, setup.py), not Python."""
    spec = find_spec(module)
    return spec is not None and not str(spec.origin).endswith(".py")


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with tests/golden/<name>; LMIKIT_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("LMIKIT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with LMIKIT_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"{name} differs from its golden file; review the change and, if intended, rerun "
        "with LMIKIT_UPDATE_GOLDEN=1")


class DeadlineExceeded(Exception):
    """Raised inside the code under test when it runs past its deadline."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail what runs inside if it takes longer than ``seconds`` (a hang becomes an error).

    Uses SIGALRM, so it works in the main thread on POSIX; a blocking ``open`` or ``read``
    is interrupted too.
    """
    def _expired(signum: int, frame: object) -> None:
        raise DeadlineExceeded(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def stage_copy(s3: Any, uri: str, model_id: str, files: dict[str, bytes], *,
               revision: str = "main", commit: str = "0" * 40, manifest: bool = True) -> None:
    """A prefix as ``lmikit weights stage`` leaves it: ``files`` under ``uri``, then (unless
    ``manifest`` is False: a copy that stopped part-way) the manifest, written last. The
    bucket must exist."""
    from lmikit.weights import Manifest, StagedFile, parse_destination
    from lmikit.weights._manifest import write_manifest

    destination = parse_destination(uri)
    for path, data in files.items():
        s3.put_object(Bucket=destination.bucket, Key=destination.key(path), Body=data)
    if manifest:
        write_manifest(s3, destination, Manifest(
            model_id, revision, commit,
            tuple(StagedFile(p, len(d), "0" * 64) for p, d in files.items())))
