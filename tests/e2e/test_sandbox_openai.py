"""End to end: the real ``openai`` package, in a separate process, against an endpoint the
``lmikit`` CLI deployed to ``lmikit sandbox serve`` (HTTP, chunked event streams, real time).
The OpenAI example of docs/sdk.md runs here as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import adapter_dir, cli

pytest.importorskip("openai")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"
# The README's sandbox walk-through spec: endpoint demo, adapter legal, sticky sessions.
SPEC = """api_version: v1
name: demo
region: us-east-1
model: {id: Qwen/Qwen2.5-7B-Instruct}
instance: {type: ml.g6e.2xlarge}
adapters:
  - {name: legal, source: adapters/legal}
"""

CHECKS = """
import json, openai, lmikit
out = {}
client = lmikit.Endpoint("demo").openai(prefix_id="doc-1")
out["models"] = [m.id for m in client.models.list()]
try:
    client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
except openai.NotFoundError as exc:
    out["unknown"] = exc.message
try:
    client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x"}],
                                   stream_options={"include_usage": True})
except openai.APIStatusError as exc:
    out["bad_request"] = [exc.status_code, exc.message]
print(json.dumps(out))
"""


def docs_example() -> str:
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- openai-example[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert found, "docs/sdk.md lost its OpenAI example"
    return found.group(1)


def run_python(code: str, env: dict[str, str], cwd: Path) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_openai_sdk_against_the_sandbox(sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    adapter_dir(tmp_path, "legal")
    r = cli(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr + r.stdout

    assert run_python(docs_example(), sandbox, tmp_path).splitlines() == [
        "[demo-legal] What is a tort?",
        "[demo-base] Summarise clause 4 ",
        "4 tokens",
        "[demo-base turn 1] Remember this",
    ]

    out = json.loads(run_python(CHECKS, sandbox, tmp_path))
    assert out["models"] == ["demo", "Qwen/Qwen2.5-7B-Instruct", "legal"]
    assert "model 'nope' is not served by endpoint 'demo'; use one of: 'demo', " \
        "'Qwen/Qwen2.5-7B-Instruct', 'legal'" in out["unknown"]
    assert out["bad_request"][0] == 424
    assert "Stream options can only be defined when `stream=True`" in out["bad_request"][1]

    r = cli(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
