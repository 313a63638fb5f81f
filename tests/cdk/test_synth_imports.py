"""Synthesizing a stack does not load the boto3 deployer: the CDK path packages adapters
with lmikit.lora, which does not import lmikit.deploy (nor boto3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, write_adapter_spec

CODE = """
import sys
import aws_cdk as cdk
from lmikit_cdk.app import build_app
app = cdk.App(outdir=sys.argv[2], context={"spec": sys.argv[1], "lmikit:nag": False})
build_app(app, build_context=sys.argv[3])
app.synth()
loaded = sorted(m for m in sys.modules if m.startswith(("lmikit.deploy", "boto3")))
assert "lmikit.lora._packaging" in sys.modules, "the adapter was not packaged"
print(loaded)
sys.exit(1 if loaded else 0)
"""


@pytest.mark.slow  # a fresh interpreter is what it tests
def test_cdk_synth_does_not_import_the_deployer(tmp_path: Path) -> None:
    spec = write_adapter_spec(tmp_path)
    result = subprocess.run([sys.executable, "-c", CODE, str(spec), str(tmp_path / "out"),
                             str(REPO)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
