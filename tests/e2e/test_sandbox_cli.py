"""End to end: the real ``lmikit`` CLI, as a subprocess, against ``lmikit sandbox serve``.

Only local HTTP servers are involved (the fake SageMaker and moto); no AWS account.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lmikit.testing import write_lora_adapter

SPEC = """api_version: v1
name: demo
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
adapters:
  - name: legal
    source: adapters/legal
"""


def _free_port_pair() -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000:
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", port + 1))
                    return port
                except OSError:
                    continue
    raise RuntimeError("no free port pair")


def _adapter(root: Path, name: str) -> Path:
    return write_lora_adapter(root / "adapters" / name, fill=sum(name.encode()) % 256)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    port = _free_port_pair()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    proc = subprocess.Popen([sys.executable, "-m", "lmikit.cli", "sandbox", "serve", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    exports: dict[str, str] = {}
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            if line.startswith("export "):
                key, value = line[7:].strip().split("=", 1)
                exports[key] = value
            if "Press Ctrl-C" in line or time.monotonic() > deadline:
                break
        assert "AWS_ENDPOINT_URL_SAGEMAKER" in exports, "the sandbox did not start"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        yield {**clean, **exports, "LMIKIT_POLL_SECONDS": "0.25"}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def lmikit(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lmikit.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_walkthrough_against_the_sandbox(sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    _adapter(tmp_path, "legal")
    _adapter(tmp_path, "support")

    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "create endpoint demo" in r.stdout and "create inference-component demo-legal" \
        in r.stdout

    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr
    assert "No changes" in r.stdout

    (tmp_path / "adapters" / "support" / ".env").write_text("HF_TOKEN=hf_secret\n")
    (tmp_path / "adapters" / "support" / "tokenizer.key").write_text("not a secret\n")
    r = lmikit(sandbox, tmp_path, "adapters", "register", "support", "adapters/support",
               "--endpoint", "demo", "--wait", "--include", "*.key")
    assert r.returncode == 0, r.stderr
    assert "demo-support InService" in r.stdout
    assert "Left out of support's package: .env (add --include PATTERN to package one)" \
        in r.stderr

    r = lmikit(sandbox, tmp_path, "adapters", "list", "--endpoint", "demo")
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["legal", "support"]

    r = lmikit(sandbox, tmp_path, "invoke", "demo", "what is a tort", "--adapter", "support")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[demo-support] what is a tort"
    assert "TTFT" in r.stderr and "tok/s" in r.stderr

    r = lmikit(sandbox, tmp_path, "invoke", "demo", "hello", "--session")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("[demo-base turn 1] hello")

    r = lmikit(sandbox, tmp_path, "status", "spec.yaml", "--json")
    rows = {(row["kind"], row["name"]): row["status"] for row in json.loads(r.stdout)}
    assert rows[("inference-component", "demo-support")] == "InService"
    assert rows[("endpoint", "demo")] == "InService"

    r = lmikit(sandbox, tmp_path, "adapters", "register", "bad", "adapters", "--endpoint",
               "demo")
    assert r.returncode == 2 and r.stderr.startswith("AdapterError:")

    r = lmikit(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert "endpoint demo" in r.stdout

    r = lmikit(sandbox, tmp_path, "status", "spec.yaml", "--json")
    assert json.loads(r.stdout) == [{"kind": "endpoint", "name": "demo", "status": "absent",
                                     "detail": ""}]
