"""``lmikit doctor`` as a subprocess against ``lmikit sandbox serve``: exit 0 when healthy,
1 with the failed check when someone changed the deployed component."""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3

from .conftest import cli, lmikit

SPEC = """api_version: v1
name: doc
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
workload:
  reused_context_tokens: 20000
  typical_request_tokens: 2000
"""


def test_doctor_cli_healthy_then_drift(sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr + r.stdout
    r = lmikit(sandbox, tmp_path, "invoke", "doc", "hello there", "--publish-metrics")
    assert r.returncode == 0, r.stderr

    r = lmikit(sandbox, tmp_path, "doctor", "spec.yaml", "--since", "10m")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Healthy." in r.stdout and "drift" in r.stdout

    sm = boto3.client("sagemaker", region_name="us-east-1",
                      endpoint_url=sandbox["AWS_ENDPOINT_URL_SAGEMAKER"],
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    spec = sm.describe_inference_component(InferenceComponentName="doc-base")["Specification"]
    container = spec["Container"]
    container["Image"] = container.pop("DeployedImage")["SpecifiedImage"]
    container["Environment"]["OPTION_MAX_ROLLING_BATCH_SIZE"] = "8"
    sm.update_inference_component(InferenceComponentName="doc-base", Specification=spec)
    for _ in range(100):
        if sm.describe_inference_component(
                InferenceComponentName="doc-base")["InferenceComponentStatus"] == "InService":
            break
        time.sleep(0.2)
    r = lmikit(sandbox, tmp_path, "doctor", "spec.yaml", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    drift = next(c for c in report["checks"] if c["name"] == "drift")
    assert drift["verdict"] == "fail" and "environment" in drift["detail"]
    assert report["healthy"] is False


def test_doctor_cli_rejects_a_bad_window(sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    r = cli(sandbox, tmp_path, "doctor", "spec.yaml", "--since", "soon")
    assert r.returncode == 2
    assert "'soon' is not a duration" in r.stderr
