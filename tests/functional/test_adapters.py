"""Adapter registry against the fake: validation, packaging, registration, concurrency."""

from __future__ import annotations

import random
import tarfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.deploy import Deployment
from lmikit.errors import AdapterError
from lmikit.lora import AdapterRegistry, package_adapter
from lmikit.testing import (
    FakeSageMaker,
    SystemClock,
    Timings,
    VirtualClock,
    write_lora_adapter,
)
from lmikit.testing._adapters import lora_tensors, safetensors_header

from .conftest import BUCKET, IMAGE, ROLE, deployment, live, make_adapter

FORMATTER = '''
from lmikit.formatters import output_formatter

@output_formatter
def shout(output):
    return output
'''


@pytest.fixture
def registry(fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
             tmp_path: Path) -> AdapterRegistry:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    return AdapterRegistry("docqa", session=session, bucket=BUCKET, clock=clock,
                           poll_seconds=1, retry_mode="standard")


def test_package_is_deterministic_and_content_addressed(tmp_path: Path) -> None:
    d = make_adapter(tmp_path, "a")
    one = package_adapter(d, model_id="Qwen/Qwen2.5-7B-Instruct", max_rank=16)
    two = package_adapter(d, model_id="Qwen/Qwen2.5-7B-Instruct", max_rank=16)
    assert one.data == two.data and one.sha256 == two.sha256
    names = tarfile.open(fileobj=BytesIO(one.data)).getnames()
    assert names == ["adapter_config.json", "adapter_model.safetensors"]


def test_package_reports_every_problem_at_once(tmp_path: Path) -> None:
    d = make_adapter(tmp_path, "bad", rank=64, base="meta-llama/Llama-3.1-8B-Instruct",
                     weights=False)
    with pytest.raises(AdapterError) as info:
        package_adapter(d, model_id="Qwen/Qwen2.5-7B-Instruct", max_rank=16)
    message = str(info.value)
    assert "trained for 'meta-llama/Llama-3.1-8B-Instruct'" in message
    assert "LoRA rank 64 exceeds the endpoint's max LoRA rank 16" in message
    assert "no adapter weights" in message


def test_package_requires_adapter_config(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(AdapterError, match="adapter_config.json is missing"):
        package_adapter(tmp_path / "empty")


def test_package_checks_the_formatter_compiles(tmp_path: Path) -> None:
    d = make_adapter(tmp_path, "f")
    bad = tmp_path / "fmt.py"
    bad.write_text("def broken(:\n")
    with pytest.raises(AdapterError, match="fmt.py"):
        package_adapter(d, formatter=bad)


def test_package_ships_the_formatter_as_model_py(tmp_path: Path) -> None:
    d = make_adapter(tmp_path, "f")
    fmt = tmp_path / "fmt.py"
    fmt.write_text(FORMATTER)
    package = package_adapter(d, formatter=fmt)
    assert package.formatters == ["shout"]
    assert "model.py" in package.files


@pytest.mark.slow
def test_register_uploads_and_creates_the_component(registry: AdapterRegistry,
                                                    fake: FakeSageMaker,
                                                    tmp_path: Path) -> None:
    info = registry.register("tax", make_adapter(tmp_path / "new", "tax"))
    assert info.status == "InService" and info.component == "docqa-tax"
    bucket, key = info.artifact_url[5:].split("/", 1)  # type: ignore[index]
    assert bucket == BUCKET and key.startswith("lmikit/docqa/adapters/tax/")
    boto3.client("s3", region_name="us-east-1").head_object(Bucket=bucket, Key=key)
    assert {a.name for a in registry.list()} == {"legal", "medical", "tax"}


def test_register_twice_is_idempotent(registry: AdapterRegistry, fake: FakeSageMaker,
                                      tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "new", "tax")
    registry.register("tax", path)
    registry.register("tax", path)
    assert len([c for c in fake.operations("CreateInferenceComponent")
                if c.params["InferenceComponentName"] == "docqa-tax"]) == 1


def _model_py_at(url: str) -> str | None:
    bucket, key = url[5:].split("/", 1)
    body = boto3.client("s3", region_name="us-east-1").get_object(Bucket=bucket, Key=key)
    with tarfile.open(fileobj=BytesIO(body["Body"].read())) as tar:
        member = tar.extractfile("model.py") if "model.py" in tar.getnames() else None
        return member.read().decode() if member else None


def test_register_on_an_lmcache_endpoint_tags_the_adapters_cache(registry: AdapterRegistry,
                                                                 tmp_path: Path) -> None:
    info = registry.register("tax", make_adapter(tmp_path / "new", "tax"))
    text = _model_py_at(info.artifact_url)  # type: ignore[arg-type]
    assert text is not None and "= _lk_isolating_input(None, 'tax." in text


def test_register_after_deploy_ships_the_deployed_bytes(registry: AdapterRegistry,
                                                       fake: FakeSageMaker,
                                                       tmp_path: Path) -> None:
    """The registry and ``lmikit deploy`` package an adapter the same way, cache tag
    included: registering a deployed adapter again finds nothing to change."""
    before = registry.adapter("legal")
    assert before is not None
    info = registry.register("legal", tmp_path / "adapters" / "legal")
    assert info.artifact_url == before["Specification"]["Container"]["ArtifactUrl"]
    assert "= _lk_isolating_input(None, 'legal." in (_model_py_at(info.artifact_url) or "")
    assert not [c for c in fake.operations("UpdateInferenceComponent")
                if c.params["InferenceComponentName"] == "docqa-legal"]


def test_register_rejects_a_rank_above_the_endpoint_limit(registry: AdapterRegistry,
                                                          tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="exceeds the endpoint's max LoRA rank 16"):
        registry.register("big", make_adapter(tmp_path / "new", "big", rank=32))


def test_failed_registration_leaves_no_component(registry: AdapterRegistry,
                                                 fake: FakeSageMaker, tmp_path: Path) -> None:
    fake.inject("CreateInferenceComponent", "failed", name="docqa-tax",
                reason="injected: adapter load failed")
    with pytest.raises(AdapterError, match="nothing is left behind"):
        registry.register("tax", make_adapter(tmp_path / "new", "tax"))
    assert "docqa-tax" not in live(fake)["inference-component"]


@pytest.mark.slow
def test_register_many_runs_concurrently(aws: None, lora_spec: Any, tmp_path: Path) -> None:
    # real time here: 8 adapters that take 0.5 s each to create cannot finish in under 4 s
    # one after another; any time well under that shows they overlapped (a loaded machine
    # stretches the ~1 s they take together, so the bound leaves room)
    fake = FakeSageMaker(clock=SystemClock(), timings=Timings(
        endpoint_create=0.05, component_create=0.05, adapter_create=0.5, delete=0.05))
    session = fake.install(boto3.Session(region_name="us-east-1"))
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    Deployment(lora_spec, session=session, role_arn=ROLE, bucket=BUCKET, base_dir=tmp_path,
               image_uri=IMAGE, poll_seconds=0.02).deploy()
    registry = AdapterRegistry("docqa", session=session, bucket=BUCKET, poll_seconds=0.02)
    items: list[tuple[str, str | Path, str | Path | None]] = [
        (f"a{i}", make_adapter(tmp_path / "many", f"a{i}"), None) for i in range(8)]
    start = time.perf_counter()
    infos = registry.register_many(items)
    elapsed = time.perf_counter() - start
    assert [i.status for i in infos] == ["InService"] * 8
    assert elapsed < 3.5, f"8 x 0.5 s registrations took {elapsed:.2f} s: not concurrent"


def test_concurrent_registries_converge_on_one_component(registry: AdapterRegistry,
                                                         session: Any, clock: VirtualClock,
                                                         fake: FakeSageMaker,
                                                         tmp_path: Path) -> None:
    import concurrent.futures as cf

    path = make_adapter(tmp_path / "new", "tax")
    others = [AdapterRegistry("docqa", session=session, bucket=BUCKET, clock=clock,
                              poll_seconds=1, retry_mode="standard") for _ in range(4)]
    with cf.ThreadPoolExecutor(4) as pool:
        infos = list(pool.map(lambda r: r.register("tax", path), others))
    assert {i.status for i in infos} == {"InService"}
    assert live(fake)["inference-component"]["docqa-tax"] == "InService"


def test_update_points_the_adapter_at_new_weights(registry: AdapterRegistry,
                                                  tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "new", "tax")
    first = registry.register("tax", path)
    write_lora_adapter(path, fill=99)  # retrained: same shapes, other weights
    second = registry.update("tax", path)
    assert second.artifact_url != first.artifact_url and second.status == "InService"


def test_remove_deletes_the_component(registry: AdapterRegistry, fake: FakeSageMaker) -> None:
    registry.remove("legal")
    assert "docqa-legal" not in live(fake)["inference-component"]
    with pytest.raises(AdapterError, match="not registered"):
        registry.remove("legal")


def test_base_with_adapters_cannot_be_deleted(registry: AdapterRegistry, session: Any) -> None:
    sm = session.client("sagemaker")
    with pytest.raises(sm.exceptions.ClientError, match="adapter components depend on it"):
        sm.delete_inference_component(InferenceComponentName="docqa-base")


def test_registry_needs_a_lora_enabled_endpoint(fake: FakeSageMaker, session: Any,
                                                clock: VirtualClock, spec: Any,
                                                tmp_path: Path) -> None:
    deployment(spec, session, clock, tmp_path).deploy()
    reg = AdapterRegistry("docqa", session=session, bucket=BUCKET, clock=clock)
    with pytest.raises(AdapterError, match="without LoRA support"):
        reg.register("x", make_adapter(tmp_path / "new", "x"))


def _keys(prefix: str) -> set[str]:
    rows = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET,
                                                                      Prefix=prefix)
    return {r["Key"] for r in rows.get("Contents", [])}


def test_failed_registration_deletes_the_artifact_it_uploaded(registry: AdapterRegistry,
                                                              fake: FakeSageMaker,
                                                              tmp_path: Path) -> None:
    fake.inject("CreateInferenceComponent", "failed", name="docqa-tax",
                reason="injected: adapter load failed")
    with pytest.raises(AdapterError, match="nothing is left behind"):
        registry.register("tax", make_adapter(tmp_path / "new", "tax"))
    assert _keys("lmikit/docqa/adapters/tax/") == set()


def test_refused_registration_uploads_nothing(registry: AdapterRegistry, fake: FakeSageMaker,
                                              tmp_path: Path) -> None:
    path = write_lora_adapter(tmp_path / "new" / "legal", fill=7)  # other weights
    before = _keys("lmikit/docqa/adapters/legal/")
    with pytest.raises(AdapterError, match="other weights; use 'update' \\(nothing was "
                                           "uploaded\\)"):
        registry.register("legal", path)
    assert _keys("lmikit/docqa/adapters/legal/") == before


def test_remove_refuses_the_base_component(registry: AdapterRegistry,
                                           fake: FakeSageMaker) -> None:
    with pytest.raises(AdapterError, match="'base' names docqa-base, the base inference "
                                           "component of 'docqa', not an adapter"):
        registry.remove("base")
    assert "docqa-base" in live(fake)["inference-component"]


@pytest.fixture
def neighbour(fake: FakeSageMaker, session: Any, clock: VirtualClock, registry: AdapterRegistry,
              tmp_path: Path) -> None:
    """A second deployment, docqa-v2, whose names start with docqa's."""
    from lmikit.spec._loader import load_spec_text

    from .conftest import SPEC_YAML

    v2 = load_spec_text(SPEC_YAML.replace("name: docqa", "name: docqa-v2")
                        + "adapters:\n  - {name: legal, source: adapters/legal}\n",
                        source=str(tmp_path / "v2.yaml"))
    deployment(v2, session, clock, tmp_path).deploy()


@pytest.mark.slow
def test_adapter_commands_never_touch_another_deployment(registry: AdapterRegistry,
                                                         fake: FakeSageMaker,
                                                         neighbour: None,
                                                         tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="'v2-base' names inference component "
                                           "docqa-v2-base, which belongs to deployment "
                                           "'docqa-v2'"):
        registry.remove("v2-base")
    with pytest.raises(AdapterError, match="belongs to deployment 'docqa-v2'"):
        registry.remove("v2-legal")
    with pytest.raises(AdapterError, match="belongs to deployment 'docqa-v2'"):
        registry.register("v2-legal", make_adapter(tmp_path / "new", "x"))
    assert {"docqa-v2-base", "docqa-v2-legal"} <= set(live(fake)["inference-component"])
    assert {a.name for a in registry.list()} == {"legal", "medical"}


def test_registry_takes_region_and_bucket_from_the_deployment(
        aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec in eu-west-1, a shell whose default region is us-east-1: the registry of the
    spec acts in eu-west-1, on the bucket the endpoint records; the registry of the bare
    endpoint name looks in us-east-1 and says it is not there."""
    from lmikit.spec._loader import load_spec_text

    from .conftest import SPEC_YAML

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clock = VirtualClock()
    fake = FakeSageMaker("us-east-1", clock=clock)
    session = fake.install(boto3.Session())
    make_adapter(tmp_path / "adapters", "legal")
    spec = load_spec_text(SPEC_YAML.replace("us-east-1", "eu-west-1")
                          + "adapters:\n  - {name: legal, source: adapters/legal}\n",
                          source=str(tmp_path / "spec.yaml"))
    Deployment(spec, session=session, role_arn=ROLE, bucket="lmikit-eu-artifacts",
               base_dir=tmp_path, image_uri=IMAGE, clock=clock, poll_seconds=10).deploy()
    assert fake.resources("eu-west-1")["endpoint"] == {"docqa": "InService"}
    assert fake.resources("us-east-1")["endpoint"] == {}
    registry = AdapterRegistry.for_spec(spec, session=session, clock=clock, poll_seconds=1)
    assert registry.where() == ("endpoint docqa in eu-west-1, artifacts in "
                                "s3://lmikit-eu-artifacts/lmikit/docqa/")
    info = registry.register("tax", make_adapter(tmp_path / "new", "tax"))
    assert info.status == "InService"
    assert info.artifact_url and info.artifact_url.startswith("s3://lmikit-eu-artifacts/")
    elsewhere = AdapterRegistry("docqa", session=session, clock=clock)
    with pytest.raises(AdapterError, match="endpoint 'docqa' not found in region us-east-1; "
                                           "deploy it first, or pass the spec"):
        elsewhere.register("x", make_adapter(tmp_path / "new", "x"))


@pytest.mark.slow
def test_registry_waits_for_a_deploy_holding_the_lease(registry: AdapterRegistry,
                                                       session: Any, clock: VirtualClock,
                                                       tmp_path: Path) -> None:
    from lmikit.aws import Lease
    from lmikit.errors import LeaseHeld

    held = Lease(session.client("s3"), BUCKET, "docqa", clock=clock, owner="ci-job-7")
    held.acquire()
    registry.lease_wait_seconds = 30
    with pytest.raises(LeaseHeld, match="deployment 'docqa' is locked by ci-job-7, running "
                                        "`lmikit deploy` since .* --force-unlock"):
        registry.register("tax", make_adapter(tmp_path / "new", "tax"))
    held.release()
    assert registry.register("tax", tmp_path / "new" / "tax").status == "InService"


def test_register_streams_the_upload_with_progress_per_five_percent(
        registry: AdapterRegistry, tmp_path: Path) -> None:
    events: list[Any] = []
    registry.progress = events.append
    big = write_lora_adapter(tmp_path / "big" / "big", layers=range(28))
    head, size = safetensors_header(lora_tensors(layers=range(28)))
    noise = random.Random(0).randbytes(size)  # weights gzip cannot shrink: ~10 MB uploaded
    (big / "adapter_model.safetensors").write_bytes(head + noise)
    store = registry.store()
    store.multipart_threshold = store.multipart_chunk = 5 * 1024 * 1024  # S3's minimum part
    registry.store = lambda: store  # type: ignore[method-assign]
    info = registry.register("big", big)
    uploads = [e for e in events if e.kind == "artifact"]
    percents = [int(e.status.rstrip("%")) for e in uploads]
    assert info.artifact_url == uploads[0].name
    assert percents == sorted(percents) and percents[-1] == 100
    assert len(percents) <= 20  # one line per 5%, not one per chunk
    assert all("adapter big" in e.detail for e in uploads)
