"""Specs that cannot start within SageMaker's caps are refused; every example starts within them.

botocore's SageMaker model caps ContainerStartupHealthCheckTimeoutInSeconds and
ModelDataDownloadTimeoutInSeconds at 3600 s; LMI's option.model_loading_timeout is sized to
the health check (lmikit.planner). The rates are stated assumptions (lmikit.planner.RATES).
"""

from __future__ import annotations

from pathlib import Path

import botocore.session
import pytest
from click.testing import CliRunner

from lmikit.accept._accept import accept_spec
from lmikit.cli import main
from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._sagemaker import start_problems
from lmikit.spec._loader import load_spec
from tests.conftest import EXAMPLES

ALL_EXAMPLES = sorted(EXAMPLES.rglob("*.yaml"))
HUB_DEEPSEEK = """\
api_version: v1
name: chat-deepseek
region: us-east-1
model:
  id: deepseek-ai/DeepSeek-V3.2
instance:
  type: ml.p5e.48xlarge
  capacity_reservation_arn: arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5e
engine:
  tensor_parallel_degree: 8
  max_model_len: 131072
kv_cache:
  mode: "off"
routing:
  strategy: least_outstanding
"""


def _api_maximum() -> int:
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.shape_for("ProductionVariantContainerStartupHealthCheckTimeoutInSeconds")
    download = model.shape_for("ProductionVariantModelDataDownloadTimeoutInSeconds")
    assert shape.metadata["max"] == download.metadata["max"]
    return int(shape.metadata["max"])


def test_every_example_is_found() -> None:
    names = {p.name for p in ALL_EXAMPLES}
    assert {"deepseek-v3.2-p5e.yaml", "mistral-large-3-p5e.yaml", "docqa-qwen7b.yaml"} <= names


@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_plans_within_sagemakers_start_up_caps(path: Path) -> None:
    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    start = plan.startup
    assert start is not None and not start.capped, start
    cap = _api_maximum()
    assert start.health_check_timeout_s <= cap and start.download_timeout_s <= cap
    assert 1.5 * (start.container_download_s + start.load_s + start.warmup_s) <= cap
    assert 1.5 * start.sagemaker_download_s <= cap
    assert start_problems(spec, plan) == []


@pytest.mark.parametrize("name", ["deepseek-v3.2-p5e.yaml", "mistral-large-3-p5e.yaml"])
def test_the_largest_examples_serve_staged_s3_weights(name: str) -> None:
    path = EXAMPLES / "models" / name
    spec = load_spec(path)
    assert spec.model.is_s3 and spec.model.hub_id
    assert f"lmikit weights stage {spec.model.hub_id} " in path.read_text()
    assert plan_spec(spec, base_dir=path.parent).startup.source in ("s3", "s3-sagemaker")  # type: ignore[union-attr]


def test_a_hub_download_past_the_cap_is_refused_by_validate(tmp_path: Path) -> None:
    spec = tmp_path / "deepseek.yaml"
    spec.write_text(HUB_DEEPSEEK)
    with pytest.raises(RenderError) as caught:
        accept_spec(spec)
    message = str(caught.value)
    assert "sagemaker: model.id 'deepseek-ai/DeepSeek-V3.2': the container's start" in message
    assert "ContainerStartupHealthCheckTimeoutInSeconds" in message
    assert "lmikit weights stage deepseek-ai/DeepSeek-V3.2 s3://BUCKET/PREFIX/" in message
    assert "model.hub_id to deepseek-ai/DeepSeek-V3.2" in message
    # HyperPod waits maxDeployTimeInSeconds (int32), not SageMaker's 3600 s: it renders
    assert "hyperpod" in accept_spec(spec, targets=("hyperpod",)).rendered


def test_a_refused_start_exits_non_zero_without_a_traceback(tmp_path: Path) -> None:
    spec = tmp_path / "deepseek.yaml"
    spec.write_text(HUB_DEEPSEEK)
    for command in (["validate", str(spec)], ["deploy", str(spec), "--dry-run"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code != 0, result.output
        assert "Traceback" not in result.output
        assert "lmikit weights stage deepseek-ai/DeepSeek-V3.2" in result.output


def test_the_same_model_staged_in_s3_fits(tmp_path: Path) -> None:
    spec = tmp_path / "deepseek.yaml"
    spec.write_text(HUB_DEEPSEEK.replace(
        "  id: deepseek-ai/DeepSeek-V3.2\n",
        "  id: s3://models-bucket/deepseek-v32/\n  hub_id: deepseek-ai/DeepSeek-V3.2\n"))
    accepted = accept_spec(spec)
    assert accepted.plan.startup is not None and not accepted.plan.startup.capped
    assert "option.tokenizer_mode=deepseek_v32" in accepted.output("serving-properties")
