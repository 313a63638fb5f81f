"""The sandbox (``lmikit sandbox serve``) as a subprocess, one per test module, and two runners
of the ``lmikit`` CLI against it: the real process, and click's CliRunner in this one."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

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


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts the sandbox process (the ``sandbox`` fixture) is in the slow tier."""
    for item in items:
        if item.path.is_relative_to(HERE) and "sandbox" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


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


def cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """What :func:`lmikit` returns, from click's CliRunner in this process: for a test of what a
    command does against the sandbox, where the process (its start, entry point, exit) is not
    what is tested; each file keeps a walk-through through :func:`lmikit`. The environment is
    ``env`` alone, as for a process, and its poll interval applies (a process reads it when
    the command modules are imported). An exception that escapes is printed to ``stderr`` as
    the process would print it."""
    from click.testing import CliRunner

    from lmikit.cli import _adapters as adapters_cmd
    from lmikit.cli import _deploy as deploy_cmd
    from lmikit.cli import main

    poll = float(env["LMIKIT_POLL_SECONDS"])
    previous = Path.cwd()
    with contextlib.ExitStack() as stack:
        for module in (deploy_cmd, adapters_cmd):
            stack.enter_context(mock.patch.object(module, "POLL", poll))
        for command in (deploy_cmd.deploy_cmd, deploy_cmd.destroy_cmd):
            option = next(p for p in command.params if p.name == "poll_seconds")
            stack.enter_context(mock.patch.object(option, "default", poll))
        os.chdir(cwd)
        stack.callback(os.chdir, previous)
        result = CliRunner().invoke(main, list(args), prog_name="lmikit",
                                    env={**dict.fromkeys(os.environ), **env})
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess(["lmikit", *args], result.exit_code, result.stdout,
                                       stderr)
