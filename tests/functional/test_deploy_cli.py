"""``lmikit deploy | destroy | gc`` in-process against the fake: what they print and what they
refuse before anything is created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.testing import FakeSageMaker

from .conftest import BUCKET, ROLE, SPEC_YAML, cli_against, make_adapter, realtime_fake

MUTATING = ("Create", "Update", "Delete", "Put", "Add", "Attach")


@pytest.fixture
def fake(aws: None) -> FakeSageMaker:
    """The CLI waits in real time: a fake whose transitions take a few milliseconds."""
    return realtime_fake()


@pytest.fixture
def cli(fake: FakeSageMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every boto3 session the CLI makes talks to the fake (and moto)."""
    make_adapter(tmp_path / "adapters", "legal")
    (tmp_path / "spec.yaml").write_text(
        SPEC_YAML + "adapters:\n  - {name: legal, source: adapters/legal}\n")
    return cli_against(fake, monkeypatch)


def test_cli_refuses_an_invalid_bucket_before_creating_a_role(cli: Any, fake: FakeSageMaker,
                                                              tmp_path: Path) -> None:
    spec = str(tmp_path / "spec.yaml")
    result = cli("deploy", spec, "--create-role", "--bucket", "Invalid_Bucket!")
    assert result.exit_code == 2
    assert result.output.startswith("DeployError: bucket 'Invalid_Bucket!' is not a valid S3 "
                                    "bucket name: it contains '!' 'B' 'I' '_'")
    assert "Traceback" not in result.output
    assert boto3.client("iam", region_name="us-east-1").list_roles()["Roles"] == []
    assert fake.calls == []


@pytest.mark.parametrize("old,new,refusal", [
    ("strategy: sticky_session", "strategy: kv_aware",
     "routing.strategy 'kv_aware' cannot be used on SageMaker with the LMI image"),
    ("type: ml.g6e.2xlarge", "type: ml.g6e.12xlarge\n  copies_per_instance: 2",
     "routing.strategy 'sticky_session': stateful sessions need one model copy per instance")])
def test_cli_deploy_refuses_a_routing_the_endpoint_would_not_do(
        cli: Any, fake: FakeSageMaker, tmp_path: Path, old: str, new: str,
        refusal: str) -> None:
    """Refused before anything is uploaded or created, with the field and what is valid."""
    spec = tmp_path / "spec.yaml"
    assert old in spec.read_text()
    spec.write_text(spec.read_text().replace(old, new))
    result = cli("deploy", str(spec), "--role-arn", ROLE, "--bucket", BUCKET)
    assert result.exit_code == 2, result.output
    assert refusal in result.output and "Traceback" not in result.output
    assert [c.operation for c in fake.calls if c.operation.startswith(MUTATING)] == []
    assert boto3.client("s3", region_name="us-east-1").list_objects_v2(
        Bucket=BUCKET).get("KeyCount", 0) == 0


def test_cli_dry_run_prints_the_plan_and_changes_nothing(cli: Any, fake: FakeSageMaker,
                                                         tmp_path: Path) -> None:
    spec = str(tmp_path / "spec.yaml")
    result = cli("deploy", spec, "--role-arn", ROLE, "--bucket", BUCKET, "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Plan for docqa in us-east-1 (dry run, nothing changed):"
    assert "  create endpoint docqa" in lines
    assert "  create inference-component docqa-legal (adapter docqa-legal)" in lines
    assert sum(line.startswith("  upload artifact s3://") for line in lines) == 2
    assert [c.operation for c in fake.calls if c.operation.startswith(MUTATING)] == []
    assert fake.resources()["endpoint"] == {}


def test_cli_deploy_prints_the_plan_then_the_summary(cli: Any, fake: FakeSageMaker,
                                                     tmp_path: Path) -> None:
    spec = str(tmp_path / "spec.yaml")
    result = cli("deploy", spec, "--role-arn", ROLE, "--bucket", BUCKET)
    assert result.exit_code == 0, result.output
    assert "Plan for docqa in us-east-1:\n  upload artifact s3://" in result.output
    lines = result.output.splitlines()
    done = lines[lines.index(next(x for x in lines if x.startswith("Done ("))):]
    assert "  create endpoint docqa" in done and "  create inference-component docqa-base" in done
    assert fake.resources()["endpoint"] == {"docqa": "InService"}
    again = cli("deploy", spec, "--role-arn", ROLE)
    assert again.exit_code == 0, again.output
    assert "  nothing: every resource already matches the spec" in again.output
    assert again.output.splitlines()[-1] == "No changes: every resource already matches " \
        "the spec."


def test_deploy_and_destroy_without_a_terminal_print_a_line_per_resource(
        cli: Any, tmp_path: Path) -> None:
    """In a log (CI, `> log`) a deploy says each resource's progress as it happens and ends
    with one line per resource, not a table redrawn nor one line of them all."""
    spec = str(tmp_path / "spec.yaml")
    result = cli("deploy", spec, "--role-arn", ROLE, "--bucket", BUCKET)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) < 200
    assert any(line.startswith("endpoint docqa: create InService (") for line in lines)
    done = lines[lines.index(next(x for x in lines if x.startswith("Done (")))]
    assert done == f"Done ({len(lines) - lines.index(done) - 1}):"
    assert "  create inference-component docqa-legal" in lines
    gone = cli("destroy", spec, "--yes").output.splitlines()
    assert max(map(len, gone)) < 200
    deleted = gone[gone.index(next(x for x in gone if x.startswith("Deleted (")))]
    assert "  endpoint docqa" in gone[gone.index(deleted):]


@pytest.mark.slow
def test_cli_gc_and_destroy(cli: Any, fake: FakeSageMaker, tmp_path: Path) -> None:
    spec = str(tmp_path / "spec.yaml")
    assert cli("deploy", spec, "--role-arn", ROLE, "--bucket", BUCKET).exit_code == 0
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.put_object(Bucket=BUCKET, Key="lmikit/docqa/adapters/legal/stale.tar.gz", Body=b"x",
                  Metadata={"lmikit-deployment": "docqa"})
    dry = cli("gc", spec, "--dry-run")
    assert dry.output.strip() == (f"Would delete (1):\n  artifact s3://{BUCKET}/lmikit/docqa/"
                                  "adapters/legal/stale.tar.gz")
    done = cli("gc", spec)
    assert done.exit_code == 0 and done.output.startswith("Deleted (1):\n  artifact s3://")
    assert cli("gc", spec).output.strip() == "Deleted: nothing (nothing unused)"
    gone = cli("destroy", spec, "--yes")
    assert gone.exit_code == 0, gone.output
    assert "  inference-component docqa-legal" in gone.output.splitlines()
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix="lmikit/docqa/")["KeyCount"] == 0
