"""The Dockerfile, its .dockerignore and the entrypoint wrapper (no Docker engine needed)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lmikit_runtime import front

from tests.conftest import lmcache_would_track_usage
from tests.container.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "container" / "Dockerfile"
IGNORE = ROOT / "container" / "Dockerfile.dockerignore"
ENTRYPOINT = ROOT / "container" / "entrypoint.sh"


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _ignored(rel: str) -> bool:
    """.dockerignore semantics for our patterns: last match wins, ! re-includes."""
    ignored = False
    for raw in IGNORE.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = rel.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        hit = any(fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(
            p, pattern.replace("**/", "*/")) or (pattern.startswith("**/") and fnmatch.
            fnmatchcase(p.split("/")[-1], pattern[3:])) for p in prefixes)
        if hit:
            ignored = not negate
    return ignored


def test_dockerfile_every_copy_source_exists_and_is_in_context() -> None:
    copies = [rest.split() for op, rest in _instructions() if op == "COPY"]
    assert copies
    for *sources, _dest in copies:
        for src in sources:
            path = ROOT / src
            assert path.exists(), f"COPY source {src} does not exist"
            files = [path] if path.is_file() else [p for p in path.rglob("*.py")]
            for f in files:
                rel = f.relative_to(ROOT).as_posix()
                assert not _ignored(rel), f"{rel} is excluded by {IGNORE.name}"


def test_dockerignore_keeps_the_context_small() -> None:
    for rel in ("README.md", "sdk/lmikit/planner/_planner.py", "tests/container/test_image.py",
                "cdk/lmikit_cdk/__init__.py", ".venv/bin/python", "container/Dockerfile"):
        assert _ignored(rel), rel
    assert not _ignored("container/lmikit_runtime/start.py")


def test_dockerfile_from_pinned_lmi_and_wraps_its_entrypoint() -> None:
    ins = _instructions()
    args = dict(rest.split("=", 1) for op, rest in ins if op == "ARG" and "=" in rest)
    from lmikit.spec import DEFAULT_LMI_VERSION
    assert f"djl-inference:{DEFAULT_LMI_VERSION}-lmi" in args["LMI_IMAGE"]
    assert ("FROM", "${LMI_IMAGE}") in ins
    entry = [json.loads(rest) for op, rest in ins if op == "ENTRYPOINT"]
    cmd = [json.loads(rest) for op, rest in ins if op == "CMD"]
    assert entry == [["/usr/local/bin/lmikit-entrypoint.sh"]]
    assert cmd == [["serve"]]  # ENTRYPOINT clears the base image's CMD: declared again


def test_dockerfile_metrics_front_env_matches_code_defaults() -> None:
    ins = _instructions()
    env: dict[str, str] = {}
    for op, rest in ins:
        if op == "ENV":
            env.update(item.split("=", 1) for item in rest.split())
    assert env["LMIKIT_METRICS_FRONT"] == "true"
    assert int(env["LMIKIT_FRONT_PORT"]) == front.DEFAULT_FRONT_PORT == 8080  # SageMaker's
    assert int(env["LMIKIT_UPSTREAM_PORT"]) == front.DEFAULT_UPSTREAM_PORT
    assert not any(k.startswith("SERVING_") for k in env)  # the start step sets those
    assert ("EXPOSE", "8080") in ins
    run = " ".join(rest for op, rest in ins if op == "RUN")
    assert "lmikit_runtime.front" in run  # imported at build time: a broken copy fails early


def test_dockerfile_turns_lmcache_usage_telemetry_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """LMCache sends usage messages (remote URL, model name) over plain HTTP unless told not
    to (LMCache usage_telemetry/identity.py is_usage_tracking_enabled): the image's own
    environment turns it off for every process, by either switch alone."""
    env: dict[str, str] = {}
    for op, rest in _instructions():
        if op == "ENV":
            env.update(item.split("=", 1) for item in rest.split())
    assert lmcache_would_track_usage({}, monkeypatch)
    for switch in ("LMCACHE_TRACK_USAGE", "DO_NOT_TRACK"):
        assert not lmcache_would_track_usage({switch: env[switch]}, monkeypatch)


def test_dockerfile_installs_log_redaction_for_every_python_process() -> None:
    """The module the .pth line imports is the one copied from the runtime, installed in a
    site-packages directory; the build fails unless a fresh interpreter has loaded it."""
    (run,) = [rest for op, rest in _instructions() if op == "RUN" and ".pth" in rest]
    assert "site.getsitepackages()[0]" in run
    assert 'cp /opt/lmikit/lmikit_runtime/logredact.py "$site/lmikit_log_redact.py"' in run
    assert 'echo "import lmikit_log_redact" > "$site/lmikit-log-redact.pth"' in run
    assert "'lmikit_log_redact' not in sys.modules" in run
    assert not _ignored("container/lmikit_runtime/logredact.py")


def test_dockerfile_redaction_step_works_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """The Dockerfile's RUN line, verbatim but for the paths, in a new virtual environment:
    its python then loads the module at start and masks a secret in a log line."""
    import venv

    (run,) = [rest for op, rest in _instructions() if op == "RUN" and ".pth" in rest]
    venv.create(tmp_path / "venv", with_pip=False)
    python = tmp_path / "venv" / "bin" / "python"
    script = run.replace("/opt/lmikit/", f"{ROOT / 'container'}/").replace("python3",
                                                                        str(python))
    subprocess.run(["sh", "-ec", script], check=True, timeout=60)
    log = ("import logging, os; logging.basicConfig(); "
           "logging.getLogger('x').warning('at %s', os.environ['U'])")
    env = {"U": "redis://u:S3ntinel@cache:6379", "LMIKIT_REDACT_ENV": "U"}
    out = subprocess.run([str(python), "-c", log], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stderr
    assert "at redis://****@cache:6379" in out and "S3ntinel" not in out


def test_entrypoint_execs_original_with_arguments() -> None:
    last = [ln for ln in ENTRYPOINT.read_text().splitlines() if ln.strip()][-1]
    assert last == 'exec "${LMIKIT_LMI_ENTRYPOINT:-/usr/local/bin/dockerd-entrypoint.sh}" "$@"'


def _fake_bin(tmp_path: Path, python_body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.write_text("#!/bin/sh\n" + python_body)
    original = tmp_path / "dockerd-entrypoint.sh"
    original.write_text('#!/bin/sh\necho "args:$*"\necho "token:${HF_TOKEN:-}"\n'
                        'echo "pythonpath:${PYTHONPATH:-unset}"\n')
    for f in (python, original):
        f.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LMIKIT_LMI_ENTRYPOINT": str(original)}


def test_entrypoint_runs_start_step_then_original(tmp_path: Path) -> None:
    env = _fake_bin(tmp_path, "echo \"export HF_TOKEN='hf_a b'\"\n")
    run = subprocess.run(["sh", str(ENTRYPOINT), "serve", "--flag"], env=env,
                         capture_output=True, text=True, timeout=20, check=True)
    assert run.stdout.splitlines() == ["args:serve --flag", "token:hf_a b", "pythonpath:unset"]
    assert "hf_a" not in run.stderr


def test_entrypoint_stops_when_start_step_fails(tmp_path: Path) -> None:
    env = _fake_bin(tmp_path, "echo 'lmikit-start: ERROR: does not fit' >&2\nexit 2\n")
    run = subprocess.run(["sh", str(ENTRYPOINT), "serve"], env=env, capture_output=True,
                         text=True, timeout=20)
    assert run.returncode == 2 and "args:" not in run.stdout
    assert "not starting LMI" in run.stderr


FAKE_LMI = """#!{python}
# A stand-in for djl-serving: binds where SERVING_INFERENCE_ADDRESS says, records a metric in
# PROMETHEUS_MULTIPROC_DIR as vLLM/LMCache would, serves until GET /quit (or 20 s).
import os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from prometheus_client import Counter
address = os.environ["SERVING_INFERENCE_ADDRESS"]
assert os.environ["SERVING_MANAGEMENT_ADDRESS"] == address
host, port = address[len("http://"):].rsplit(":", 1)
Counter("lmcache:num_hit_tokens", "hit tokens", ["model_name"]).labels("fake").inc(7)
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("args=%s pythonpath=%s" % (sys.argv[1:], os.environ.get("PYTHONPATH", "unset"))
                ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.quit = self.path == "/quit"
    def log_message(self, *args):
        pass
server = HTTPServer((host, int(port)), Handler)
server.quit, server.timeout, deadline = False, 1, time.monotonic() + 20
while not server.quit and time.monotonic() < deadline:
    server.handle_request()
server.server_close()
"""


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def _stop(pid: int) -> None:
    """Stop the front the test's start step left running (by its pid file)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    status = Path(f"/proc/{pid}/status")
    while time.monotonic() < deadline:
        try:
            if "\tZ" in status.read_text().split("State:", 1)[1].split("\n", 1)[0]:
                return  # exited; its new parent reaps it
        except (FileNotFoundError, IndexError):
            return
        time.sleep(0.02)


def test_wrapper_start_step_front_and_lmi_end_to_end(tmp_path: Path) -> None:
    """The real wrapper and start step: the front listens before LMI is exec'd, LMI is moved
    behind it, /ping and LMI's answers pass through, the metrics path serves what LMI's
    processes wrote."""
    home = tmp_path / "home"
    (home / "lmikit").mkdir(parents=True)
    (home / "lmikit" / "__init__.py").write_text("")
    (home / "lmikit" / "sizing.py").symlink_to(ROOT / "sdk" / "lmikit" / "sizing.py")
    (home / "lmikit_runtime").symlink_to(ROOT / "container" / "lmikit_runtime")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    lmi = tmp_path / "dockerd-entrypoint.sh"
    lmi.write_text(FAKE_LMI.format(python=sys.executable))
    for f in (bin_dir / "python3", lmi):
        f.chmod(0o755)
    port, upstream = free_port(), free_port()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LMIKIT_HOME": str(home),
           "LMIKIT_LMI_ENTRYPOINT": str(lmi), "LMIKIT_RUNTIME_DIR": str(tmp_path / "rt"),
           "LMIKIT_AUTOCONFIG": "false", "LMIKIT_METRICS_PATH": "/metrics",
           "LMIKIT_FRONT_HOST": "127.0.0.1", "LMIKIT_FRONT_PORT": str(port),
           "LMIKIT_UPSTREAM_PORT": str(upstream)}
    log = tmp_path / "container.log"  # a file: the front keeps the log open after LMI exits
    with log.open("w") as log_file:
        proc = subprocess.Popen(["sh", str(ENTRYPOINT), "serve", "--flag"], env=env,
                                stdout=log_file, stderr=subprocess.STDOUT)
    pid_file = tmp_path / "rt" / "front.pid"
    try:
        deadline = time.monotonic() + 15
        status, body = 0, ""
        while time.monotonic() < deadline:
            if pid_file.exists():  # the start step is done: the front must be accepting
                status, body = _get(f"http://127.0.0.1:{port}/ping")
                if status == 200:
                    break
                assert status == 502, body  # LMI still binding: the front says so
            time.sleep(0.05)
        assert status == 200 and body == "args=['serve', '--flag'] pythonpath=unset"
        status, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and 'lmcache:num_hit_tokens_total{model_name="fake"} 7.0' in text
        assert _get(f"http://127.0.0.1:{port}/quit")[0] == 200
        assert proc.wait(timeout=10) == 0
        err = log.read_text()
        assert f"metrics front: /metrics on 127.0.0.1:{port}" in err
        assert f"LMI moved to http://127.0.0.1:{upstream}" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        if pid_file.exists():
            _stop(int(pid_file.read_text()))
