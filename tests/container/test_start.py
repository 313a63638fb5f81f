"""The start-up step: exports for the wrapper, the HF token path, never a secret in a log."""

from __future__ import annotations

import io
import json
import logging
import os
import shlex
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from lmikit_runtime.hostfacts import Host
from lmikit_runtime.secrets import SecretError, fetch_hf_token, region_of
from lmikit_runtime.start import main

from tests.container.conftest import free_port, make_root

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


class FakeSpawn:
    """Records spawned background processes; a front reports ready (or dies) on its pipe."""

    def __init__(self, front_says: bytes = b"ready\n") -> None:
        self.children: list[dict[str, Any]] = []
        self.front_says = front_says
        self.pid = 4242

    def __call__(self, argv: list[str], **kw: Any) -> FakeSpawn:
        self.children.append({"argv": argv, **kw})
        ready = kw["env"].get("LMIKIT_FRONT_READY_FD")
        if argv[-1] == "lmikit_runtime.front" and self.front_says:
            os.write(int(ready), self.front_says)
        return self

    def kill(self) -> None:
        self.killed = True

    def module(self, name: str) -> dict[str, Any]:
        (child,) = [c for c in self.children if c["argv"][1:] == ["-m", name]]
        return child


def _front_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    return _env(tmp_path, LMIKIT_METRICS_PATH="/metrics", LMIKIT_FRONT_HOST="127.0.0.1",
                LMIKIT_FRONT_PORT=str(port), **extra)


def test_start_front_by_default_moves_lmi_behind_it(tmp_path: Path) -> None:
    spawn = FakeSpawn()
    client = FakeSecrets({"SecretString": TOKEN})
    env = _front_env(tmp_path, free_port(), LMIKIT_HF_TOKEN_SECRET_ARN=ARN,
                     LMIKIT_UPSTREAM_PORT="18081")
    out = io.StringIO()
    assert main(env, stdout=out, host=_host(tmp_path), secrets_client=client, spawn=spawn) == 0
    assert len(spawn.children) == 1  # no port-9400 sidecar unless asked for
    child = spawn.module("lmikit_runtime.front")
    assert "HF_TOKEN" not in child["env"] and child["start_new_session"] is True
    assert child["stdout"] == 2  # container log, never the wrapper's $(...) pipe
    assert child["env"]["LMIKIT_UPSTREAM_PORT"] == "18081"
    assert len(child["pass_fds"]) == 2 and child["env"]["LMIKIT_FRONT_FD"] == str(
        child["pass_fds"][0])
    exports = _parse(out.getvalue())
    assert exports["SERVING_INFERENCE_ADDRESS"] == "http://127.0.0.1:18081"
    assert exports["SERVING_MANAGEMENT_ADDRESS"] == "http://127.0.0.1:18081"
    assert exports["PROMETHEUS_MULTIPROC_DIR"] == child["env"]["PROMETHEUS_MULTIPROC_DIR"]
    assert (tmp_path / "rt" / "front.pid").read_text() == "4242\n"


def test_start_front_opt_out_keeps_lmi_on_its_port_with_9400_sidecar(tmp_path: Path) -> None:
    spawn = FakeSpawn()
    out = io.StringIO()
    env = _front_env(tmp_path, free_port(), LMIKIT_METRICS_FRONT="false")
    assert main(env, stdout=out, host=_host(tmp_path), spawn=spawn) == 0
    child = spawn.module("lmikit_runtime.metrics")
    assert len(spawn.children) == 1 and child["stdout"] == 2
    exports = _parse(out.getvalue())
    assert not any(k.startswith("SERVING_") for k in exports)
    assert exports["PROMETHEUS_MULTIPROC_DIR"] == child["env"]["PROMETHEUS_MULTIPROC_DIR"]


def test_start_front_plus_explicit_sidecar_port(tmp_path: Path) -> None:
    spawn = FakeSpawn()
    env = _front_env(tmp_path, free_port(), LMIKIT_METRICS_PORT="9400")
    assert main(env, stdout=io.StringIO(), host=_host(tmp_path), spawn=spawn) == 0
    assert spawn.module("lmikit_runtime.front") and spawn.module("lmikit_runtime.metrics")


EMF = json.dumps({"namespace": "LMIKit/Container", "interval_s": 60, "dimensions": {
    "EndpointName": "docqa", "InferenceComponentName": "docqa-base"}})


def test_start_emf_emitter_runs_next_to_the_front(tmp_path: Path, caplog) -> None:
    spawn = FakeSpawn()
    out = io.StringIO()
    with caplog.at_level(logging.INFO):
        assert main(_front_env(tmp_path, free_port(), LMIKIT_EMF=EMF,
                               LMIKIT_HF_TOKEN_SECRET_ARN=ARN), stdout=out,
                    host=_host(tmp_path), spawn=spawn,
                    secrets_client=FakeSecrets({"SecretString": TOKEN})) == 0
    child = spawn.module("lmikit_runtime.emf")
    assert child["stdout"] == 2 and child["start_new_session"] is True  # container log
    assert "HF_TOKEN" not in child["env"] and child["env"]["LMIKIT_EMF"] == EMF
    exports = _parse(out.getvalue())
    assert child["env"]["PROMETHEUS_MULTIPROC_DIR"] == exports["PROMETHEUS_MULTIPROC_DIR"]
    assert spawn.module("lmikit_runtime.front")
    assert "EMF emitter: LMIKit/Container every 60 s" in caplog.text


def test_start_emf_alone_sets_up_the_registry_without_a_front(tmp_path: Path) -> None:
    spawn = FakeSpawn()
    out = io.StringIO()
    assert main(_env(tmp_path, LMIKIT_EMF=EMF), stdout=out, host=_host(tmp_path),
                spawn=spawn) == 0
    assert [c["argv"][-1] for c in spawn.children] == ["lmikit_runtime.emf"]
    exports = _parse(out.getvalue())
    assert "PROMETHEUS_MULTIPROC_DIR" in exports and "SERVING_INFERENCE_ADDRESS" not in exports


def test_start_bad_emf_config_turns_the_emitter_off_not_the_container(tmp_path: Path,
                                                                       caplog) -> None:
    spawn = FakeSpawn()
    with caplog.at_level(logging.WARNING):
        assert main(_front_env(tmp_path, free_port(), LMIKIT_EMF='{"dimensions": {}}'),
                    stdout=io.StringIO(), host=_host(tmp_path), spawn=spawn) == 0
    assert [c["argv"][-1] for c in spawn.children] == ["lmikit_runtime.front"]
    assert "EMF emitter OFF: LMIKIT_EMF dimensions must give exactly" in caplog.text


def test_start_without_metrics_path_runs_no_front(tmp_path: Path) -> None:
    spawn = FakeSpawn()
    out = io.StringIO()
    assert main(_env(tmp_path), stdout=out, host=_host(tmp_path), spawn=spawn) == 0
    assert spawn.children == [] and "SERVING_" not in out.getvalue()


def test_start_front_port_taken_is_a_clear_startup_error(tmp_path: Path, caplog) -> None:
    spawn = FakeSpawn()
    out = io.StringIO()
    with socket.create_server(("127.0.0.1", 0)) as taken, caplog.at_level(logging.ERROR):
        port = taken.getsockname()[1]
        assert main(_front_env(tmp_path, port), stdout=out, host=_host(tmp_path),
                    spawn=spawn) == 2
    assert out.getvalue() == "" and spawn.children == []
    assert f"metrics front cannot listen on 127.0.0.1:{port}" in caplog.text
    assert "LMIKIT_METRICS_FRONT=false" in caplog.text


@pytest.mark.parametrize("says,why", [(b"", "exited"), (b"Traceback", "did not report ready")])
def test_start_front_that_dies_stops_the_start(tmp_path: Path, caplog, says, why) -> None:
    spawn = FakeSpawn(front_says=says)
    out = io.StringIO()
    with caplog.at_level(logging.ERROR):
        assert main(_front_env(tmp_path, free_port()), stdout=out, host=_host(tmp_path),
                    spawn=spawn) == 2
    assert out.getvalue() == "" and f"metrics front {why}" in caplog.text
    assert "not starting LMI" in caplog.text


@pytest.mark.parametrize("extra,match", [({"LMIKIT_FRONT_PORT": "http"}, "not a TCP port"),
                                         ({"LMIKIT_UPSTREAM_PORT": "SAME"}, "front's own port")])
def test_start_front_bad_ports(tmp_path: Path, caplog, extra, match) -> None:
    port = free_port()
    extra = {k: str(port) if v == "SAME" else v for k, v in extra.items()}
    env = {**_front_env(tmp_path, port), **extra}
    with caplog.at_level(logging.ERROR):
        assert main(env, stdout=io.StringIO(), host=_host(tmp_path), spawn=FakeSpawn()) == 2
    assert match in caplog.text


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
