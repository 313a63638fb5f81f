"""The sandbox (``lmikit sandbox serve``) as a subprocess, one per test module, and a runner
for the real ``lmikit`` CLI against it."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
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


class _Output:
    """Reads a process's output on a thread until it ends, so the process never blocks on a
    full pipe (however much it logs) and a wait for a line is bounded."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._stdout = proc.stdout
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._stdout:
            for line in self._stdout:
                self._lines.put(line)
        self._lines.put(None)

    def until(self, marker: str, seconds: float) -> list[str]:
        """The lines up to the one holding ``marker``, the end of the output, or
        ``seconds``, whichever comes first."""
        out: list[str] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line)
            if marker in line:
                break
        return out

    def join(self, seconds: float) -> None:
        self._thread.join(seconds)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    port = _free_port_pair()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    proc = subprocess.Popen([sys.executable, "-m", "lmikit.cli", "sandbox", "serve", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    output = _Output(proc)
    exports: dict[str, str] = {}
    try:
        for line in output.until("Press Ctrl-C", seconds=60):
            if line.startswith("export "):
                key, value = line[7:].strip().split("=", 1)
                exports[key] = value
        assert "AWS_ENDPOINT_URL_SAGEMAKER" in exports, "the sandbox did not start"
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("AWS_", "LMIKIT_"))}
        yield {**clean, **exports}  # exactly what a user pastes
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        output.join(10)  # the output ended with the process: the reader closes the pipe


def lmikit(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lmikit.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
