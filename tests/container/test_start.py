"""The start-up step: exports for the wrapper, the HF token path, never a secret in a log."""

from __future__ import annotations

import io
import json
import logging
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from lmikit_runtime.hostfacts import Host
from lmikit_runtime.secrets import SecretError, fetch_hf_token, region_of
from lmikit_runtime.start import main

from tests.container.conftest import make_root

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf"
TOKEN = "hf_SuperSecretValue123"


class FakeSecrets:
    """Stands in for boto3's secretsmanager client (get_secret_value only)."""

    def __init__(self, response: dict[str, Any] | None = None, error: str | None = None):
        self.response, self.error, self.calls = response or {}, error, []

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # noqa: N803 - boto3 name
        self.calls.append(SecretId)
        if self.error:
            exc = Exception("denied")
            exc.response = {"Error": {"Code": self.error}}  # type: ignore[attr-defined]
            raise exc
        return self.response


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"LMIKIT_RUNTIME_DIR": str(tmp_path / "rt"), "LMIKIT_MODEL_DIR": str(tmp_path),
            "LMIKIT_PLAN": json.dumps({"tier": "cpu", "weight_bytes": 16 * 10**9, "tp": 1}),
            **extra}


def _parse(exports: str) -> dict[str, str]:
    out = {}
    for line in exports.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        out[name] = shlex.split(value)[0]
    return out


def _host(tmp_path: Path) -> Host:
    return Host(make_root(tmp_path, mem_total_gib=128, mem_available_gib=120,
                          cgroup=("v2", 64 * 1024**3, 0), gpus=1), env={})


def test_start_writes_lmcache_file_and_exports(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(_env(tmp_path), stdout=out, host=_host(tmp_path)) == 0
    exports = _parse(out.getvalue())
    path = Path(exports["OPTION_LMCACHE_CONFIG_FILE"])
    cfg = yaml.safe_load(path.read_text())
    assert cfg["max_local_cpu_size"] == float(exports["LMCACHE_MAX_LOCAL_CPU_SIZE"])
    assert exports["OPTION_LMCACHE_AUTO_CONFIG"] == "false"


def test_start_refusal_exits_2_with_reason(tmp_path: Path, caplog) -> None:
    env = _env(tmp_path, LMIKIT_PLAN=json.dumps({"tier": "cpu", "tp": 1, "cpu_size_gb": 500}))
    out = io.StringIO()
    with caplog.at_level(logging.ERROR):
        assert main(env, stdout=out, host=_host(tmp_path)) == 2
    assert out.getvalue() == ""
    assert "cpu_size_gb 500 does not fit" in caplog.text


def test_start_token_goes_to_exports_never_to_logs(tmp_path: Path, caplog) -> None:
    client = FakeSecrets({"SecretString": json.dumps({"HF_TOKEN": TOKEN})})
    out = io.StringIO()
    with caplog.at_level(logging.DEBUG):
        code = main(_env(tmp_path, LMIKIT_HF_TOKEN_SECRET_ARN=ARN), stdout=out,
                    host=_host(tmp_path), secrets_client=client)
    assert code == 0 and client.calls == [ARN]
    assert _parse(out.getvalue())["HF_TOKEN"] == TOKEN
    assert TOKEN not in caplog.text and ARN in caplog.text
    assert not any(TOKEN in p.read_text() for p in (tmp_path / "rt").rglob("*") if p.is_file())


def test_start_metrics_sidecar_gets_no_token(tmp_path: Path) -> None:
    spawned: list[dict[str, Any]] = []
    client = FakeSecrets({"SecretString": TOKEN})
    env = _env(tmp_path, LMIKIT_HF_TOKEN_SECRET_ARN=ARN, LMIKIT_METRICS_PATH="/metrics")
    out = io.StringIO()
    main(env, stdout=out, host=_host(tmp_path), secrets_client=client,
         spawn=lambda argv, **kw: spawned.append({"argv": argv, **kw}))
    (child,) = spawned
    assert child["argv"][1:] == ["-m", "lmikit_runtime.metrics"]
    assert "HF_TOKEN" not in child["env"] and child["start_new_session"] is True
    assert _parse(out.getvalue())["PROMETHEUS_MULTIPROC_DIR"] == child["env"][
        "PROMETHEUS_MULTIPROC_DIR"]


def test_fetch_hf_token_plain_string_and_binary() -> None:
    assert fetch_hf_token(ARN, FakeSecrets({"SecretString": f" {TOKEN}\n"})) == TOKEN
    assert fetch_hf_token(ARN, FakeSecrets({"SecretBinary": TOKEN.encode()})) == TOKEN


def test_fetch_hf_token_json_without_key_lists_keys_not_values() -> None:
    client = FakeSecrets({"SecretString": json.dumps({"password": TOKEN})})
    with pytest.raises(SecretError, match=r"keys present: password\)") as info:
        fetch_hf_token(ARN, client)
    assert TOKEN not in str(info.value)


def test_fetch_hf_token_access_denied_names_permission() -> None:
    with pytest.raises(SecretError, match="AccessDeniedException.*secretsmanager:GetSecretValue"):
        fetch_hf_token(ARN, FakeSecrets(error="AccessDeniedException"))


def test_region_of_rejects_other_arns() -> None:
    assert region_of(ARN) == "us-east-1"
    with pytest.raises(SecretError, match="not a Secrets Manager secret ARN"):
        region_of("arn:aws:s3:::bucket")
