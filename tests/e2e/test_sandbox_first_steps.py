"""End to end: what a first-time user types (the README's sandbox walk-through and the usual
mistakes) through the real ``lmikit`` CLI against ``lmikit sandbox serve``."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import cli, lmikit
from .test_sandbox_cli import SPEC

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_sandbox_exports_are_the_ones_serve_prints(sandbox: dict[str, str]) -> None:
    text = README.read_text()
    section = text[text.index("### Try it without an AWS account"):]
    section = section[:section.index("$ mkdir demo")]
    readme = dict(re.findall(r"((?:AWS|LMIKIT)_[A-Z0-9_]+)=(\S+)", section))
    printed = {k for k in sandbox if k.startswith(("AWS_", "LMIKIT_"))}
    # an AWS_ variable left out sends that service to real AWS; the LMIKIT_ ones make a
    # sandbox deploy take seconds instead of a minute
    assert set(readme) == printed
    assert {"LMIKIT_POLL_SECONDS", "LMIKIT_IAM_PROPAGATION_SECONDS"} <= printed
    for key, value in readme.items():
        if key.startswith("AWS_ENDPOINT_URL_"):
            port = "4566" if key.startswith("AWS_ENDPOINT_URL_SAGEMAKER") else "4567"
            assert value == f"http://127.0.0.1:{port}", key


def test_first_steps_and_mistakes_give_clear_answers(sandbox: dict[str, str],
                                                     tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC.replace("adapters:\n  - name: legal\n"
                                                     "    source: adapters/legal\n", ""))
    r = lmikit(sandbox, tmp_path, "doctor", "spec.yaml")
    assert r.returncode == 1
    assert "endpoint demo does not exist in us-east-1" in r.stdout
    assert "lmikit deploy SPEC" in r.stdout

    r = lmikit(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Deleted: nothing (already absent)\n"  # no empty progress table

    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--dry-run")
    assert r.returncode == 2
    assert r.stdout == ""
    assert "'demo' is not deployed in us-east-1 yet" in r.stderr and "--create-role" in r.stderr

    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--create-role")
    assert r.returncode == 0, r.stderr
    roles = [line for line in r.stdout.splitlines() if line.startswith("iam-role ")]
    assert roles and roles[-1].startswith("iam-role lmikit-demo-execution: create done (")

    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml", "--dry-run")  # the deployed role
    assert r.returncode == 0, r.stderr
    assert "nothing: every resource already matches the spec" in r.stdout
    r = lmikit(sandbox, tmp_path, "deploy", "spec.yaml")
    assert r.returncode == 0, r.stderr
    assert "No changes" in r.stdout

    r = lmikit(sandbox, tmp_path, "adapters", "list", "--endpoint", "ghost")
    assert r.returncode == 2
    assert "AdapterError: endpoint 'ghost' not found in region us-east-1" in r.stderr

    r = lmikit(sandbox, tmp_path, "destroy", "spec.yaml", "--yes")
    assert r.returncode == 0, r.stderr
    assert "endpoint demo" in r.stdout


def test_adapters_remove_help_says_what_wait_waits_for(sandbox: dict[str, str],
                                                       tmp_path: Path) -> None:
    r = cli(sandbox, tmp_path, "adapters", "remove", "--help")
    assert "Wait until the adapter component is deleted." in " ".join(r.stdout.split())
    r = cli(sandbox, tmp_path, "adapters", "register", "--help")
    assert "Wait until the adapter component is InService." in " ".join(r.stdout.split())
