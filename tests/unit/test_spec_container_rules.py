"""Spec rules that come from what the container and SageMaker can actually do: reserved
metrics paths, network isolation, S3 drafts, and the minimum LMI version per feature."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from lmikit.cli import main
from lmikit.errors import SpecError
from lmikit.planner import _versions as lv
from lmikit.planner._planner import plan_spec
from lmikit.spec._loader import load_spec_text
from tests.unit.test_render_env import ISOLATED, S3
from tests.unit.test_spec import BASE


def _problems(text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, source="s.yaml")
    return str(info.value)


@pytest.mark.parametrize("path", ["/ping", "/invocations", "/invocations/x", "/predictions/m",
                                  "/v1/chat/completions", "/models", "/server/metrics",
                                  "/adapters", "/execution-parameters", "/cluster/x"])
def test_metrics_path_refuses_what_djl_serving_answers(path):
    text = _problems(BASE + f"observability:\n  metrics_path: {path}\n")
    assert "observability.metrics_path" in text and "/metrics" in text


def test_metrics_path_root_is_refused_by_sagemakers_pattern():
    """botocore's MetricsEndpointPath needs a character after the slash."""
    text = _problems(BASE + "observability:\n  metrics_path: /\n")
    assert "observability.metrics_path" in text and "[got '/']" in text


@pytest.mark.parametrize("path", ["/metrics", "/lmikit/metrics", "/pingx"])
def test_metrics_path_accepts_paths_nobody_else_answers(path):
    spec = load_spec_text(BASE + f"observability:\n  metrics_path: {path}\n")
    assert spec.observability.metrics_path == path


def test_network_isolation_refuses_a_hub_model():
    text = _problems(BASE + "security:\n  network_isolation: true\n")
    assert "security.network_isolation" in text and "s3://" in text


def test_validate_cli_refuses_network_isolation_with_a_hub_model(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(BASE + "security:\n  network_isolation: true\n")
    result = CliRunner().invoke(main, ["validate", str(spec)])
    assert result.exit_code != 0
    assert "security.network_isolation" in result.output


@pytest.mark.parametrize(("extra", "field"), [
    ("  hf_token_secret_arn: arn:aws:secretsmanager:us-east-1:111122223333:secret:t-AbCdEf\n",
     "security.hf_token_secret_arn"),
])
def test_network_isolation_refuses_what_needs_the_network(extra, field):
    assert field in _problems(ISOLATED + extra)


def test_network_isolation_refuses_a_remote_tier_and_base_formatters():
    text = _problems(ISOLATED + "kv_cache:\n  mode: remote\n  remote_url: redis://h:6379\n"
                     "formatters:\n  input: fmt.py\n")
    assert "kv_cache.remote_url" in text and "formatters.input" in text


def test_network_isolation_draft_must_lie_under_the_weights():
    hub = _problems(ISOLATED + "engine:\n  speculative: {method: eagle3, draft_model: a/b}\n")
    assert "engine.speculative.draft_model" in hub and "cannot be downloaded" in hub
    elsewhere = _problems(ISOLATED + "engine:\n  speculative: {method: eagle3, draft_model: "
                          "s3://other-bucket/draft/}\n")
    assert "must lie under model.id's prefix" in elsewhere
    load_spec_text(ISOLATED + f"engine:\n  speculative: {{method: eagle3, draft_model: "
                   f"{S3}draft/}}\n")


def test_s3_draft_without_sagemaker_copy_is_refused():
    """LMI downloads only option.speculative_draft_model from S3, which nothing passes to
    vLLM; speculative_config's model gets no S3 handling."""
    text = _problems(BASE + "engine:\n  speculative: {method: eagle3, draft_model: "
                     "s3://b/draft/}\n")
    assert "engine.speculative.draft_model" in text and "does not download" in text


@pytest.mark.parametrize(("version", "extra", "feature", "minimum"), [
    ("0.33.0", "", "stateful sessions", "0.34.0"),
    ("0.35.0", "workload:\n  reused_context_tokens: 400000\n", "LMCache config file",
     "0.36.0"),
    ("0.34.0", "routing:\n  strategy: random\nengine:\n  lmi_version: 0.34.0\n  speculative: "
     "{method: eagle3, draft_model: a/b}\nkv_cache:\n  mode: 'off'\n", "EAGLE", "0.35.0"),
    ("0.32.0", "routing:\n  strategy: random\nkv_cache:\n  mode: 'off'\n", "async vLLM service",
     "0.33.0"),
])
def test_lmi_version_older_than_a_feature_is_refused(version, extra, feature, minimum):
    text = BASE + extra
    if "lmi_version" not in text:
        text += f"engine:\n  lmi_version: {version}\n"
    spec = load_spec_text(text)
    with pytest.raises(SpecError, match=f"engine.lmi_version.*>= {minimum}") as info:
        plan_spec(spec)
    assert feature in str(info.value)


def test_lmi_version_refuses_a_model_newer_than_the_image():
    spec = load_spec_text(BASE.replace("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
                          + "engine:\n  lmi_version: 0.34.0\n")
    with pytest.raises(SpecError, match="Qwen3VLForConditionalGeneration needs >= 0.35.0"):
        plan_spec(spec)


def test_lmi_version_pinned_default_serves_every_catalog_model():
    """No catalog model needs more than the pinned 0.38.0."""
    from lmikit.catalog._models import catalog_ids
    from lmikit.spec import DEFAULT_LMI_VERSION

    for model in catalog_ids():
        found = lv.min_version_for(lv.model_architectures(model))
        if found:
            assert lv.version_tuple(found[0]) <= lv.version_tuple(DEFAULT_LMI_VERSION), model
    assert lv.model_architectures("nobody/unknown") == []


def test_lmi_version_rows_cite_a_djl_serving_source():
    rows = [lv.ASYNC_SERVICE, lv.SESSIONS, lv.LORA, lv.FORMATTERS, lv.ADAPTER_FORMATTERS,
            lv.LMCACHE_ENV, lv.LMCACHE_FILE, lv.SPECULATIVE, *lv.ARCHITECTURES.values(),
            *lv.MODEL_IDS.values()]
    for row in rows:
        assert "djl-serving" in row.source, row.feature
        lv.version_tuple(row.version)
