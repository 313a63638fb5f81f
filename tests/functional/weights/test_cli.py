"""``lmikit weights stage`` and ``lmikit weights check`` as a person runs them: the fake Hub
through HF_ENDPOINT, moto's S3 and Secrets Manager."""

from __future__ import annotations

import json
import sys
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result

from lmikit.cli import main

from ._fake_hub import FakeHub
from .conftest import BUCKET, FILES, MODEL, REGION, TOKEN

DESTINATION = f"s3://{BUCKET}/tiny/"


@pytest.fixture(autouse=True)
def _hub_endpoint(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, ["weights", *args])


def test_stage_prints_a_line_per_file_and_the_spec_line(hub: FakeHub, s3: Any) -> None:
    result = _run("stage", MODEL, DESTINATION, "--region", REGION)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{MODEL}@") and "6 files, 6 to copy, 0 already in S3" in lines[0]
    copied = [line for line in lines if line.startswith("copied ")]
    assert len(copied) == len(FILES)
    assert copied[-1].endswith(f"6/6 files, {_total_mb()} of {_total_mb()}, "
                               + copied[-1].rsplit(", ", 1)[1])
    assert copied[-1].rsplit(", ", 1)[1].endswith("/s")
    assert result.stdout.splitlines()[-2:] == [f"Use it in a spec as   model.id: {DESTINATION}",
                                               f"                      model.hub_id: {MODEL}"]
    assert "6 file(s) copied" in result.stdout and "manifest written" in result.stdout


def _total_mb() -> str:
    from rich.filesize import decimal

    return str(decimal(sum(len(d) for d in FILES.values())))


def test_a_second_run_skips_every_file(hub: FakeHub, s3: Any) -> None:
    assert _run("stage", MODEL, DESTINATION).exit_code == 0
    result = _run("stage", MODEL, DESTINATION)
    assert result.exit_code == 0, result.output
    assert sum(line.startswith("skipped ") for line in result.stderr.splitlines()) == 6
    assert "nothing to copy, 6 file(s) already there" in result.stdout


def test_dry_run_lists_files_and_writes_nothing(hub: FakeHub, s3: Any) -> None:
    result = _run("stage", MODEL, DESTINATION, "--dry-run", "--exclude", "original/*")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Would copy 5 file(s) (")
    assert "original/consolidated.00.pth" not in result.stdout
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_the_token_comes_from_secrets_manager_and_is_never_printed(hub: FakeHub,
                                                                  s3: Any) -> None:
    hub.add_repo("org/gated", FILES, gated="manual").granted.add(TOKEN)
    hub.tokens.add(TOKEN)
    arn = boto3.client("secretsmanager", region_name="eu-west-1").create_secret(
        Name="hub-token", SecretString=json.dumps({"HF_TOKEN": TOKEN}))["ARN"]
    result = _run("stage", "org/gated", DESTINATION, "--token-secret", arn)
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    assert any(authorized for server, _, _, authorized, _ in hub.requests if server == "hub")


def test_a_gated_repo_without_a_token_is_one_line_naming_the_fixes(hub: FakeHub,
                                                                  s3: Any) -> None:
    hub.add_repo("org/gated", FILES, gated="manual")
    result = _run("stage", "org/gated", DESTINATION)
    assert result.exit_code == 2
    assert result.stderr == (
        f"WeightsError: org/gated is a gated repo and no Hub token was given: accept its "
        f"terms at {hub.url}/org/gated with your Hub account, then set HF_TOKEN to a token of "
        "that account or pass --token-secret ARN (a Secrets Manager secret holding the "
        "token)\n")


def test_a_bad_destination_exits_2_naming_it(hub: FakeHub, s3: Any) -> None:
    result = _run("stage", MODEL, "s3://Bad_Bucket/x/")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith("WeightsError: destination 's3://Bad_Bucket/x/': bucket "
                                    "'Bad_Bucket' is not a valid S3 bucket name")


def test_a_secret_without_a_token_key_names_the_keys_present(hub: FakeHub, s3: Any) -> None:
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="wrong", SecretString=json.dumps({"password": "x"}))["ARN"]
    result = _run("stage", MODEL, DESTINATION, "--token-secret", arn)
    assert result.exit_code == 2
    assert result.stderr == (f"WeightsError: secret {arn} is JSON without a token: use one "
                             "of HF_TOKEN, hf_token, HUGGING_FACE_HUB_TOKEN, token (keys "
                             "present: password)\n")


def test_check_says_complete_or_names_what_is_missing(hub: FakeHub, s3: Any) -> None:
    missing = _run("check", DESTINATION)
    assert missing.exit_code == 2
    assert missing.stderr.startswith(f"WeightsError: {DESTINATION} has no lmikit-manifest.json")
    assert _run("stage", MODEL, DESTINATION).exit_code == 0
    done = _run("check", DESTINATION, "--model-id", MODEL, "--revision", "main")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith(f"{DESTINATION}: {MODEL}@") and "complete." in done.stdout


def test_without_the_weights_extra_the_command_says_how_to_add_it(
        hub: FakeHub, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "huggingface_hub"
                 or m.startswith("huggingface_hub.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    result = _run("stage", MODEL, DESTINATION)
    assert result.exit_code == 2
    assert result.stderr == ("Error: lmikit weights stage needs huggingface_hub: "
                             "pip install 'lmikit[weights]'\n")
    assert hub.requests == []


def test_the_secret_layouts_are_the_ones_lmikits_image_reads() -> None:
    from container.lmikit_runtime.secrets import TOKEN_KEYS as IMAGE_KEYS
    from lmikit.weights._token import TOKEN_KEYS

    assert TOKEN_KEYS == IMAGE_KEYS


def test_lora_isolation_writes_the_model_py_deploy_checks(hub: FakeHub, s3: Any) -> None:
    from lmikit.render._model_artifact import base_isolation_model_py
    from lmikit.weights import check_model_py

    result = _run("stage", MODEL, DESTINATION, "--region", REGION, "--lora-isolation")
    assert result.exit_code == 0, result.output
    assert "model.py (lmikit's LoRA isolation for the base model) is written" in result.stderr
    check_model_py(DESTINATION, base_isolation_model_py(), s3=s3)
    assert s3.get_object(Bucket=BUCKET, Key="tiny/model.py")["Body"].read() == \
        base_isolation_model_py()
