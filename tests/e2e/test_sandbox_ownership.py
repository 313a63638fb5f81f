"""End to end, the CLI against ``lmikit sandbox serve`` + moto (the concurrent deploys as real
processes, the other commands through click's runner): deployments whose names share a prefix
stay apart, two deploys of one spec at once do not break each other, destroy
leaves nothing of the deployment behind, and the adapter commands act in the deployment's
region."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3

from tests.functional._account import extras, nothing

from .conftest import adapter_dir, cli

SPEC = """api_version: v1
name: {name}
region: {region}
model: {{id: Qwen/Qwen2.5-7B-Instruct}}
instance: {{type: ml.g6e.2xlarge}}
adapters:
  - {{name: legal, source: adapters/legal}}
"""


SCALE_TO_ZERO = """api_version: v1
name: zero
region: us-east-1
model: {id: Qwen/Qwen2.5-7B-Instruct}
instance: {type: ml.g6e.2xlarge, min_count: 0, max_count: 2}
"""


def _client(env: dict[str, str], service: str, region: str = "us-east-1") -> Any:
    url = env["AWS_ENDPOINT_URL_SAGEMAKER" if service == "sagemaker" else
              "AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING" if service == "application-autoscaling"
              else f"AWS_ENDPOINT_URL_{service.upper()}"]
    return boto3.client(service, region_name=region, endpoint_url=url,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _everything(env: dict[str, str], name: str) -> dict[str, Any]:
    """Every resource and object of deployment ``name`` (by its tag, or its prefix), in every
    service: SageMaker, S3, Application Auto Scaling, CloudWatch and IAM."""
    sm, s3 = _client(env, "sagemaker"), _client(env, "s3")

    def mine(arn: str) -> bool:
        tags = sm.list_tags(ResourceArn=arn)["Tags"]
        return {"Key": "lmikit:deployment", "Value": name} in tags

    out = {
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]
                      if mine(e["EndpointArn"])],
        "configs": [c["EndpointConfigName"] for c in
                    sm.list_endpoint_configs(MaxResults=100)["EndpointConfigs"]
                    if mine(c["EndpointConfigArn"])],
        "components": [c["InferenceComponentName"] for c in
                       sm.list_inference_components(MaxResults=100)["InferenceComponents"]
                       if mine(c["InferenceComponentArn"])],
        "models": [m["ModelName"] for m in sm.list_models()["Models"] if mine(m["ModelArn"])],
        "objects": [],
    }
    for bucket in s3.list_buckets()["Buckets"]:
        rows = s3.list_objects_v2(Bucket=bucket["Name"], Prefix=f"lmikit/{name}/")
        out["objects"] += [o["Key"] for o in rows.get("Contents", [])]
    return {**{k: sorted(v) for k, v in out.items()},
            **extras(lambda service: _client(env, service), name)}


NOTHING = {"endpoints": [], "configs": [], "components": [], "models": [], "objects": [],
           **nothing()}


def _start(env: dict[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lmikit.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(runs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each run. Every run's output is read while waiting,
    all at once: a run that fills its pipe would otherwise never exit. A run still going
    after 180 s is killed, and the wait fails."""
    def finish(r: subprocess.Popen[str]) -> tuple[int, str, str]:
        out, err = r.communicate(timeout=180)
        return r.returncode, out, err

    try:
        with ThreadPoolExecutor(len(runs)) as pool:
            return list(pool.map(finish, runs))
    finally:
        for r in runs:
            if r.poll() is None:
                r.kill()
                r.communicate()


def test_prefix_sharing_deployments_stay_apart_and_destroy_leaves_nothing(
        sandbox: dict[str, str], tmp_path: Path) -> None:
    adapter_dir(tmp_path, "legal")
    for name in ("docqa", "docqa-v2"):
        (tmp_path / f"{name}.yaml").write_text(SPEC.format(name=name, region="us-east-1"))
    runs = [_start(sandbox, tmp_path, "deploy", "docqa.yaml", "--create-role"),
            _start(sandbox, tmp_path, "deploy", "docqa.yaml", "--create-role"),
            _start(sandbox, tmp_path, "deploy", "docqa-v2.yaml", "--create-role")]
    results = _finish(runs)
    same = sorted(results[:2], key=lambda r: r[0])
    assert same[0][0] == 0, same[0][2]  # one deploy of docqa converged ...
    assert same[1][0] == 0 or same[1][2].startswith(  # ... the other waited for nothing
        "LeaseHeld: deployment 'docqa' is locked by "), same[1][2]
    assert results[2][0] == 0, results[2][2]
    neighbour = _everything(sandbox, "docqa-v2")
    assert neighbour["components"] == ["docqa-v2-base", "docqa-v2-legal"]
    assert len(neighbour["objects"]) == 2 and len(neighbour["configs"]) == 1

    assert neighbour["scalable-targets"] == {"inference-component/docqa-v2-base": (1, 1)}
    assert neighbour["dashboards"] and neighbour["alarms"] and neighbour["roles"]

    r = cli(sandbox, tmp_path, "destroy", "docqa.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert _everything(sandbox, "docqa") == NOTHING
    assert _everything(sandbox, "docqa-v2") == neighbour

    r = cli(sandbox, tmp_path, "destroy", "docqa-v2.yaml", "--yes", "--keep-artifacts")
    assert r.returncode == 0, r.stderr
    left = _everything(sandbox, "docqa-v2")
    assert left == {**NOTHING, "objects": neighbour["objects"]}  # kept, as asked


def test_scale_to_zero_deploy_creates_scaling_and_observability_and_destroy_leaves_nothing(
        sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SCALE_TO_ZERO)
    r = cli(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role", "--dry-run")
    assert r.returncode == 0, r.stderr
    for line in ("create iam-role lmikit-zero-execution",
                 "create scalable-target inference-component/zero-base",
                 "create scaling-policy zero-base-scale-from-zero",
                 "create alarm zero-base-scale-from-zero", "create dashboard zero-lmikit"):
        assert line in r.stdout, r.stdout
    assert _everything(sandbox, "zero") == NOTHING  # a dry run changes nothing

    r = cli(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr
    have = _everything(sandbox, "zero")
    assert have["scalable-targets"] == {"inference-component/zero-base": (0, 2)}
    assert sorted(have["scaling-policies"]) == ["zero-base-scale-from-zero",
                                                "zero-base-target-tracking"]
    assert "zero-base-scale-from-zero" in have["alarms"]
    assert any(a.startswith("zero-lmikit-") for a in have["alarms"])
    assert list(have["dashboards"]) == ["zero-lmikit"]
    assert list(have["roles"]) == list(have["iam-policies"]) == ["lmikit-zero-execution"]

    r = cli(sandbox, tmp_path, "status", "spec.yaml", "--json")
    assert r.returncode == 0, r.stderr
    assert {"scalable-target", "scaling-policy", "alarm", "dashboard", "iam-role"} <= {
        row["kind"] for row in json.loads(r.stdout)}

    r = cli(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert _everything(sandbox, "zero") == NOTHING


def test_adapter_commands_act_in_the_deployments_region(sandbox: dict[str, str],
                                                        tmp_path: Path) -> None:
    adapter_dir(tmp_path, "legal")
    adapter_dir(tmp_path, "support")
    (tmp_path / "spec.yaml").write_text(SPEC.format(name="west", region="eu-west-1"))
    r = cli(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr  # the shell's default region is us-east-1

    r = cli(sandbox, tmp_path, "adapters", "register", "support", "adapters/support",
            "--endpoint", "west")
    assert r.returncode == 2
    assert "AdapterError: endpoint 'west' not found in region us-east-1; deploy it first, " \
        "or pass the spec (--spec) or --region" in r.stderr
    assert "Traceback" not in r.stderr

    r = cli(sandbox, tmp_path, "adapters", "register", "support", "adapters/support",
            "--spec", "spec.yaml", "--wait")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("lmikit adapters: endpoint west in eu-west-1, artifacts in "
                               "s3://sagemaker-eu-west-1-123456789012/lmikit/west/")
    assert "west-support InService" in r.stdout

    r = cli(sandbox, tmp_path, "adapters", "remove", "base", "--spec", "spec.yaml")
    assert r.returncode == 2
    assert "AdapterError: 'base' names west-base, the base inference component" in r.stderr

    r = cli(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert _client(sandbox, "sagemaker", "eu-west-1").list_endpoints()["Endpoints"] == []
