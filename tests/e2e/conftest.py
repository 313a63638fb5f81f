"""The sandbox (``lmikit sandbox serve``) as a subprocess, one per test module, and a runner
for the real ``lmikit`` CLI against it."""

from __future__ import annotations

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


def adapter_dir(root: Path, name: str) -> Path:
    """A valid LoRA adapter (config and safetensors weights lmikit's checks accept)."""
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
