"""End to end: the real ``lmikit`` CLI, as a subprocess, against ``lmikit sandbox serve``.

Only local HTTP servers are involved (the fake SageMaker and moto); no AWS account.
"""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import adapter_dir, lmikit

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


def test_cli_walkthrough_against_the_sandbox(sandbox: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    adapter_dir(tmp_path, "legal")
    adapter_dir(tmp_path, "support")

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
    assert r.returncode == 2 and "\nAdapterError: adapter 'adapters' is not valid" in r.stderr
    assert r.stderr.startswith("lmikit adapters: endpoint demo in us-east-1")

    r = lmikit(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert "endpoint demo" in r.stdout

    r = lmikit(sandbox, tmp_path, "status", "spec.yaml", "--json")
    assert json.loads(r.stdout) == [{"kind": "endpoint", "name": "demo", "status": "absent",
                                     "detail": ""}]
