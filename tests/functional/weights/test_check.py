"""``lmikit.weights.check_staged``: what a deployer asks before naming a staged prefix as
model data. The prefixes are written here as ``stage`` writes them (moto's S3)."""

from __future__ import annotations

from typing import Any

import pytest

from lmikit.weights import MANIFEST_NAME, WeightsError, check_staged
from tests.conftest import stage_copy

from .conftest import BUCKET, REGION

URI = f"s3://{BUCKET}/llama/"
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"
FILES = {"config.json": b"{}", "model.safetensors": b"\0" * 4096}


@pytest.fixture(autouse=True)
def _staged(s3: Any) -> None:
    stage_copy(s3, URI, "meta-llama/Llama-3.1-8B-Instruct", FILES, commit=COMMIT)


def test_a_finished_copy_passes_with_its_model_revision_and_region(s3: Any) -> None:
    staged = check_staged(URI, model_id="meta-llama/Llama-3.1-8B-Instruct", revision="main",
                          region=REGION, s3=s3)
    assert staged.uri == URI and staged.manifest.commit == COMMIT
    assert staged.manifest.total_bytes == sum(len(d) for d in FILES.values())
    assert staged.extra_keys == ()
    assert check_staged(URI, revision=COMMIT, s3=s3).manifest.revision == "main"


def test_a_prefix_without_a_manifest_is_unfinished(s3: Any) -> None:
    s3.delete_object(Bucket=BUCKET, Key=f"llama/{MANIFEST_NAME}")
    with pytest.raises(WeightsError, match=rf"s3://{BUCKET}/llama/ has no {MANIFEST_NAME}: "
                       "the copy is unfinished .* run `lmikit weights stage MODEL_ID "
                       rf"s3://{BUCKET}/llama/` to finish it"):
        check_staged(URI, s3=s3)


def test_another_model_or_revision_is_named(s3: Any) -> None:
    with pytest.raises(WeightsError, match=r"it holds meta-llama/Llama-3.1-8B-Instruct, not "
                       r"Qwen/Qwen3-8B; it holds revision main \(commit 0e9e39f2.*\), not v2"):
        check_staged(URI, model_id="Qwen/Qwen3-8B", revision="v2", s3=s3)


def test_a_missing_or_truncated_file_is_named(s3: Any) -> None:
    s3.delete_object(Bucket=BUCKET, Key="llama/config.json")
    s3.put_object(Bucket=BUCKET, Key="llama/model.safetensors", Body=b"\0" * 10)
    with pytest.raises(WeightsError, match=r"config.json is missing; model.safetensors has 10 "
                       r"bytes, the manifest says 4,096"):
        check_staged(URI, s3=s3)


def test_a_folder_marker_is_refused_as_sagemaker_refuses_it(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="llama/tokenizer/", Body=b"")
    with pytest.raises(WeightsError, match=r"llama/tokenizer/ is a folder marker"):
        check_staged(URI, s3=s3)


def test_a_bucket_outside_the_endpoints_region_is_refused(s3: Any) -> None:
    with pytest.raises(WeightsError, match=r"bucket staged-models is in us-east-1, not "
                       r"eu-west-1: SageMaker reads model data only"):
        check_staged(URI, region="eu-west-1", s3=s3)


def test_objects_the_manifest_does_not_list_are_reported(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="llama/notes.txt", Body=b"hi")
    assert check_staged(URI, s3=s3).extra_keys == ("llama/notes.txt",)


def test_an_unreadable_manifest_is_named(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=f"llama/{MANIFEST_NAME}", Body=b'{"format": "x"}')
    with pytest.raises(WeightsError, match=r"is not a manifest lmikit can read \(format 'x'"):
        check_staged(URI, s3=s3)


def test_the_check_needs_only_boto3() -> None:
    """A deployer calls it with lmikit's core dependencies: huggingface_hub is not imported."""
    import subprocess
    import sys

    code = ("import sys, lmikit.weights; from lmikit.weights import check_staged;"
            "print('huggingface_hub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
