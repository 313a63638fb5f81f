"""Without AWS credentials a command fails with a clear DeployError, before any network call."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from lmikit.cli import main
from lmikit.deploy import Deployment
from lmikit.errors import DeployError
from lmikit.loader import load_spec
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
