"""End to end: the real ``openai`` package, in a separate process, against an endpoint the
``lmikit`` CLI deployed to ``lmikit sandbox serve`` (HTTP, chunked event streams, real time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import adapter_dir, lmikit

pytest.importorskip("openai")

SPEC = """api_version: v1
name: chat
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
routing:
  strategy: sticky_session
adapters:
  - name: legal
    source: adapters/legal
"""

CLIENT = """
import json, openai, lmikit
out = {}
ep = lmikit.Endpoint("chat")
client = ep.openai()
chunks = list(client.chat.completions.create(
    model="legal", messages=[{"role": "user", "content": "what is a tort"}], stream=True,
    stream_options={"include_usage": True}))
out["stream"] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
out["usage"] = chunks[-1].usage.completion_tokens
out["completion"] = client.completions.create(
    model="Qwen/Qwen2.5-7B-Instruct", prompt="one two").choices[0].text
with ep.session() as s:
    reply = s.openai().chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "remember"}])
    out["session"] = reply.choices[0].message.content
try:
    client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
except openai.NotFoundError as exc:
    out["unknown"] = exc.message
print(json.dumps(out))
"""


def test_openai_client_against_the_sandbox(sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    adapter_dir(tmp_path, "legal")
    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr + r.stdout

    r = subprocess.run([sys.executable, "-c", CLIENT], cwd=tmp_path, env=sandbox,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stream"] == "[chat-legal] what is a tort "
    assert out["usage"] == 5
    assert out["completion"] == "[chat-base] one two"
    assert out["session"] == "[chat-base turn 1] remember"
    assert "model 'nope' is not served by endpoint 'chat'; use one of: 'chat', " \
        "'Qwen/Qwen2.5-7B-Instruct', 'legal'" in out["unknown"]

    r = lmikit(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
