"""Without AWS credentials a command fails with a clear DeployError, before any network call."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from lmikit.cli import main
from lmikit.deploy import Deployment
from lmikit.errors import DeployError
from lmikit.spec._loader import load_spec
from tests.conftest import DEFAULT_SPEC


@pytest.fixture()
def no_credentials(monkeypatch, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)


def test_status_without_credentials_is_a_deploy_error(no_credentials):
    with pytest.raises(DeployError, match="no AWS credentials found.*lmikit sandbox serve"):
        Deployment(load_spec(DEFAULT_SPEC)).status()


def test_cli_status_without_credentials_prints_one_line(no_credentials):
    result = CliRunner().invoke(main, ["status", str(DEFAULT_SPEC)])
    assert result.exit_code == 2
    assert result.output.startswith("DeployError: DescribeEndpoint failed: no AWS credentials")
    assert "Traceback" not in result.output


def test_cli_doctor_without_credentials_exits_3_not_1(no_credentials):
    """Exit 1 means a check failed; doctor that could not read the account judged nothing.
    Its error line starts with the same kind as every other command's (``AwsError.kind``)."""
    result = CliRunner().invoke(main, ["doctor", str(DEFAULT_SPEC)])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("DeployError: doctor could not check docqa-qwen7b in "
                                    "us-east-1, so nothing was judged: DescribeEndpoint failed: "
                                    "no AWS credentials found")
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback


@pytest.fixture()
def no_region(monkeypatch, tmp_path):
    for var in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


@pytest.mark.parametrize("command", [["invoke", "docqa-qwen7b", "hi"],
                                     ["bench", "docqa-qwen7b"],
                                     ["adapters", "list", "--endpoint", "docqa-qwen7b"]])
def test_a_command_naming_an_endpoint_without_a_region_says_how_to_give_one(no_region,
                                                                            command):
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    assert result.output == (
        "Error: no AWS region is configured: give the spec file instead of the endpoint name "
        "(its region is used), pass --region REGION (region= in Python), or set "
        "AWS_DEFAULT_REGION (or a profile's region, `aws configure`)\n")


def test_the_library_without_a_region_raises_region_missing(no_region):
    from lmikit.client._endpoint import Endpoint
    from lmikit.errors import RegionMissing

    with pytest.raises(RegionMissing, match="no AWS region is configured"):
        Endpoint("docqa-qwen7b")


def test_a_spec_path_needs_no_configured_region(no_region, no_credentials, tmp_path):
    """The spec's region is used: the command gets as far as AWS's credentials."""
    spec = tmp_path / "docqa.yaml"
    spec.write_text(DEFAULT_SPEC.read_text())
    result = CliRunner().invoke(main, ["adapters", "list", "--endpoint", str(spec)])
    assert result.exit_code == 2
    assert result.output.startswith("DeployError: DescribeEndpoint failed: no AWS credentials")
