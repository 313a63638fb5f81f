"""The Dockerfile, its .dockerignore and the entrypoint wrapper (no Docker engine needed)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from pathlib import Path

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
    for rel in ("README.md", "sdk/lmikit/plan.py", "tests/container/test_image.py",
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
