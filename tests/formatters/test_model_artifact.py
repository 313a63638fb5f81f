"""The base model artifact carries the built model.py for spec.formatters."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from lmikit.errors import AdapterError
from lmikit.planner._planner import plan_spec
from lmikit.render._model_artifact import model_artifact, model_artifact_files
from lmikit.spec import DeploymentSpec

ROOT = Path(__file__).resolve().parents[2]


def _spec(**formatters: str) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "api_version": "v1", "name": "d", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "formatters": formatters})


def test_model_artifact_includes_built_model_py() -> None:
    spec = _spec(input="examples/formatters/chat_guardrails.py",
                 output="examples/formatters/chat_guardrails.py")
    data = model_artifact(spec, plan_spec(spec), base_dir=ROOT)
    assert data is not None
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        text = tar.extractfile("model.py").read().decode()  # type: ignore[union-attr]
    assert "from djl_python.input_parser import input_formatter" in text
    assert "def format_request" in text and "from lmikit" not in text


def test_model_artifact_rejects_file_without_named_kind() -> None:
    spec = _spec(input="examples/formatters/passthrough_lmi_native.py")
    with pytest.raises(AdapterError, match="has no input formatter"):
        model_artifact_files(spec, plan_spec(spec), base_dir=ROOT)
