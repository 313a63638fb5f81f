"""Model-specific LMI options and hardware rules (lmikit.catalog._model_options,
lmikit.planner._fit).

Option names and values are checked against vLLM 0.23.0's own ``EngineArgs`` (the vLLM LMI
0.38 ships), vendored as facts in tests/unit/data/vllm-0.23.0-engine-args.json with the file
each list came from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmikit.catalog._instances import get_instance
from lmikit.catalog._model_options import (
    DEEPSEEK_V32,
    HARDWARE_ROWS,
    MINISTRAL_3_8B,
    MISTRAL_LARGE_3,
    OPTION_ROWS,
    QWEN3_VL_8B,
    lmi_options,
    option_rows,
)
from lmikit.catalog._models import get_model
from lmikit.errors import PlanError
from lmikit.planner._planner import plan, plan_spec
from lmikit.planner._startup import weights_source
from lmikit.render._env import lmi_environment, serving_properties
from lmikit.spec._loader import load_spec, load_spec_text
from tests.conftest import EXAMPLE_SPECS, EXAMPLES
from tests.unit.test_render_hyperpod import crd_validator  # noqa: F401  (fixture)

VLLM = json.loads((Path(__file__).parent / "data" / "vllm-0.23.0-engine-args.json").read_text())
MODEL_SPECS = {
    DEEPSEEK_V32: EXAMPLES / "models" / "deepseek-v3.2-p5e.yaml",
    MISTRAL_LARGE_3: EXAMPLES / "models" / "mistral-large-3-p5e.yaml",
    MINISTRAL_3_8B: EXAMPLES / "models" / "ministral-3-8b-g6e.yaml",
    QWEN3_VL_8B: EXAMPLES / "models" / "qwen3-vl-8b-g6e.yaml",
}
TABLE_ENV_NAMES = {r.env_name for r in OPTION_ROWS}


def _rendered(path: Path) -> tuple[dict[str, str], str]:
    spec = load_spec(path)
    plan_ = plan_spec(spec, base_dir=path.parent)
    # No serving.properties where SageMaker copies S3 weights (network isolation): every
    # option is then in the Model's environment, which lmi_environment already holds.
    props = "" if weights_source(spec) == "s3-sagemaker" else serving_properties(spec, plan_)
    return lmi_environment(spec, plan_), props


# --- the table ------------------------------------------------------------------------------

@pytest.mark.parametrize("row", OPTION_ROWS, ids=lambda r: f"{r.model_id}:{r.option}")
def test_model_options_every_row_says_why_and_names_a_source(row):
    assert len(row.why) > 40
    assert "huggingface.co/" in row.source or "github.com/" in row.source


@pytest.mark.parametrize("row", OPTION_ROWS, ids=lambda r: f"{r.model_id}:{r.option}")
def test_model_options_names_are_vllm_engine_args(row):
    """LMI forwards an option to vLLM only when its name is an EngineArgs field."""
    assert row.option in VLLM["engine_args"]


@pytest.mark.parametrize("row", OPTION_ROWS, ids=lambda r: f"{r.model_id}:{r.option}")
def test_model_options_values_are_ones_vllm_accepts(row):
    if row.option in VLLM["choices"]:
        assert row.value in VLLM["choices"][row.option]["values"]
    elif row.option in VLLM["json_fields"]:
        value = json.loads(row.value)
        assert isinstance(value, dict) and value
        assert set(value) <= set(VLLM["modalities"]["values"])
        assert all(isinstance(n, int) and n >= 0 for n in value.values())
    else:
        pytest.fail(f"no vendored rule checks the value of {row.option}")


@pytest.mark.parametrize("row", OPTION_ROWS, ids=lambda r: f"{r.model_id}:{r.option}")
def test_model_options_only_boolean_fields_get_true_or_false(row):
    """LMI turns the strings true/false into --name/--no-name flags whatever the field is."""
    assert (row.value.lower() in ("true", "false")) == (row.option in VLLM["bool_fields"])


def test_model_options_never_set_quantization_or_dtype():
    """vLLM reads the FP8 scheme from the checkpoint; LMI's dtype accepts no 8-bit value."""
    assert not {r.option for r in OPTION_ROWS} & {"quantization", "dtype", "kv_cache_dtype"}


def test_model_options_match_model_ids_case_insensitively():
    assert lmi_options(MISTRAL_LARGE_3.upper()) == lmi_options(MISTRAL_LARGE_3)
    assert lmi_options("Qwen/Qwen3-8B") == {}


def test_model_options_encoder_data_parallel_only_above_tp_1():
    assert "OPTION_MM_ENCODER_TP_MODE" not in lmi_options(QWEN3_VL_8B, 1)
    assert lmi_options(QWEN3_VL_8B, 2)["OPTION_MM_ENCODER_TP_MODE"] == "data"


# --- rendered from a spec ---------------------------------------------------------------------

@pytest.mark.parametrize("model_id", sorted(MODEL_SPECS))
def test_model_spec_renders_exactly_its_table_rows(model_id):
    path = MODEL_SPECS[model_id]
    spec = load_spec(path)
    env, props = _rendered(path)
    rows = option_rows(model_id, spec.engine.tensor_parallel_degree)
    assert rows
    assert {k: v for k, v in env.items() if k in TABLE_ENV_NAMES} == {
        r.env_name: r.value for r in rows}
    for row in rows:  # no serving.properties where SageMaker copies the weights (_rendered)
        assert f"option.{row.option}={row.value}\n" in props or (
            props == "" and weights_source(spec) == "s3-sagemaker")


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_model_options_never_collide_with_generic_options(path):
    env, _ = _rendered(path)
    assert not set(env) & TABLE_ENV_NAMES


def test_model_options_collide_with_no_option_the_spec_can_render():
    text = ("api_version: v1\nname: all\nregion: us-east-1\nmodel: {id: Qwen/Qwen3-8B, "
            "revision: main}\ninstance: {type: ml.g6e.12xlarge}\nengine:\n"
            "  tensor_parallel_degree: 2\n  kv_cache_dtype: fp8\n  max_model_len: 32768\n"
            "  speculative: {method: eagle3, draft_model: a/b}\n"
            "workload: {reused_context_tokens: 400000}\n"
            "adapters:\n  - {name: a, source: x, rank: 32}\n")
    spec = load_spec_text(text)
    assert not set(lmi_environment(spec, plan_spec(spec))) & TABLE_ENV_NAMES


# --- the planner: refuse what cannot hold the model, accept the documented layout ------------

@pytest.mark.parametrize("model_id", sorted(MODEL_SPECS))
def test_model_spec_plans_on_its_documented_instance(model_id):
    path = MODEL_SPECS[model_id]
    spec = load_spec(path)
    p = plan_spec(spec, base_dir=path.parent)
    assert p.max_model_len == spec.engine.max_model_len <= p.gpu_kv_capacity_tokens


@pytest.mark.parametrize(("model_id", "gib"), [(DEEPSEEK_V32, "626.7"),
                                               (MISTRAL_LARGE_3, "631.9")])
def test_planner_refuses_eight_h100_for_the_large_moe_models(model_id, gib):
    with pytest.raises(PlanError, match=(
            rf"^{model_id} does not fit ml.p5.48xlarge at engine.tensor_parallel_degree 8: its "
            rf"weights take {gib} GiB, and 8 x NVIDIA H100 SXM 80GB \(79.6 GiB each; 8 on the "
            r"instance, 636.8 GiB\).* leave no room for KV .*choose one of the instance types "
            r"that hold it: .*ml.p5e.48xlarge \(8 x NVIDIA H200 141GB, "
            r"engine.tensor_parallel_degree 8")):
        plan(model_id, "ml.p5.48xlarge", tp=8)


@pytest.mark.parametrize("model_id", [DEEPSEEK_V32, MISTRAL_LARGE_3])
def test_planner_refuses_the_large_moe_models_below_tp_8_on_h200(model_id):
    with pytest.raises(PlanError, match="raise engine.tensor_parallel_degree to 8"):
        plan(model_id, "ml.p5e.48xlarge", tp=4)


@pytest.mark.parametrize("instance", ["ml.p4de.24xlarge", "ml.g6e.48xlarge"])
def test_planner_refuses_sparse_attention_on_gpus_without_its_kernels(instance):
    with pytest.raises(PlanError, match=(
            r"uses DeepSeek sparse attention, which vLLM 0.23.0 runs only on GPUs of compute "
            r"capability 9.x or 10.x .* has NVIDIA (A100 80GB \(8.0\)|L40S \(8.9\))")):
        plan(DEEPSEEK_V32, instance, tp=8)


def test_sparse_attention_rows_name_their_kernels_source():
    (row,) = HARDWARE_ROWS
    assert row.compute_capability_majors == (9, 10)
    assert "flashmla_sparse.py" in row.source


def test_planner_accepts_deepseek_v32_on_blackwell():
    assert plan(DEEPSEEK_V32, "ml.p6-b200.48xlarge", tp=8).gpu_kv_capacity_tokens > 10**6


@pytest.mark.parametrize(("model_id", "instance"), [(MINISTRAL_3_8B, "ml.g6.xlarge"),
                                                     (QWEN3_VL_8B, "ml.g6e.2xlarge")])
def test_planner_refuses_the_full_context_where_its_kv_does_not_fit(model_id, instance):
    """Both small models load on any catalog GPU; their 256K context is what does not fit.
    KV room = GPU memory x 0.9 - 1.5 GiB runtime - weights, over the KV bytes per token; the
    fix offered keeps 10% of it as the estimate's margin."""
    geo, gpu = get_model(model_id), get_instance(instance).gpu
    room = int(((gpu.memory_gib * 0.9 - 1.5) * 2**30 - geo.weight_bytes)
               / geo.gpu_kv_bytes_per_token(2))
    assert 0 < room < 262144
    with pytest.raises(PlanError, match=(
            rf"does not fit {instance} .* leave KV room for {room} tokens where "
            rf"engine.max_model_len needs 262144 tokens. Fix: lower engine.max_model_len to "
            rf"at most {int(room * 0.9)}; or choose one of the instance types that hold it: ")):
        plan(model_id, instance, max_model_len=262144)


def test_planner_rule_one_copy_must_hold_one_typical_request():
    """Without engine.max_model_len a copy must hold the KV of one typical request."""
    fits = plan(QWEN3_VL_8B, "ml.g6.2xlarge", request_tokens=16_000, mode="off")
    assert 16_000 <= fits.gpu_kv_capacity_tokens < 32_000
    with pytest.raises(PlanError, match=r"one typical request \(workload.typical_request_tokens\) "
                       "needs 32000 tokens"):
        plan(QWEN3_VL_8B, "ml.g6.2xlarge", request_tokens=32_000, mode="off")


# --- the model example specs pass the same outside checks as the top-level examples ----------

@pytest.mark.parametrize("model_id", sorted(MODEL_SPECS))
def test_model_spec_requests_pass_botocore_model(model_id):
    from lmikit.catalog._images import lmi_image_uri
    from tests.unit.test_render_sagemaker import _all_errors, _render

    spec = load_spec(MODEL_SPECS[model_id])
    r = _render(spec, plan_spec(spec, base_dir=MODEL_SPECS[model_id].parent),
                image=lmi_image_uri(spec.region, spec.engine.lmi_version))
    assert _all_errors(r) == []


@pytest.mark.parametrize("model_id", sorted(MODEL_SPECS))
def test_model_spec_hyperpod_manifest_validates_and_carries_the_options(crd_validator,  # noqa: F811
                                                                        model_id):
    """LMI worker: the options as OPTION_* variables. vLLM worker (the operator's cache or
    routing): as flags of the worker's vLLM server, named as in its own option list."""
    from lmikit.render._hyperpod import hyperpod_manifest
    from tests.unit.test_render_hyperpod import IMAGE, _errors
    from tests.unit.test_render_hyperpod_vllm import VLLM as VLLM_WORKER_FLAGS
    from tests.unit.test_render_hyperpod_vllm import _pairs

    spec = load_spec(MODEL_SPECS[model_id])
    manifest = hyperpod_manifest(spec, plan_spec(spec, base_dir=MODEL_SPECS[model_id].parent),
                                 image_uri=IMAGE)
    assert _errors(crd_validator, manifest) == []
    worker = manifest["spec"]["worker"]
    rows = option_rows(model_id, spec.engine.tensor_parallel_degree)
    if "args" in worker:
        args = _pairs(worker["args"])
        for row in rows:
            flag = "--" + row.option.replace("_", "-")
            assert flag in VLLM_WORKER_FLAGS and args[flag] == row.value
    else:
        env = {e["name"]: e["value"] for e in worker["environmentVariables"]}
        assert {r.env_name: r.value for r in rows}.items() <= env.items()


def test_model_specs_use_both_hyperpod_worker_kinds():
    from lmikit.render._hyperpod import uses_operator_cache

    kinds = set()
    for path in MODEL_SPECS.values():
        spec = load_spec(path)
        kinds.add(uses_operator_cache(spec, plan_spec(spec, base_dir=path.parent)))
    assert kinds == {True, False}


@pytest.mark.parametrize("model_id", sorted(MODEL_SPECS))
def test_model_spec_hyperpod_notes_name_the_vllm_the_options_were_checked_against(model_id):
    """A worker image whose vLLM lmikit's table does not know gets a note naming the vLLM
    the model's flags were checked against; a spec without the operator's KV cache or
    routing runs no vLLM worker and gets none."""
    from lmikit.render._hyperpod import hyperpod_notes, uses_operator_cache

    spec = load_spec(MODEL_SPECS[model_id])
    plan = plan_spec(spec, base_dir=MODEL_SPECS[model_id].parent)
    notes = hyperpod_notes(spec, plan, vllm_image="registry.example.com/team/vllm:custom")
    named = [n for n in notes if "cannot check vllm_image" in n]
    if uses_operator_cache(spec, plan):
        assert len(named) == 1 and "were checked against vLLM" in named[0]
    else:
        assert named == []


def test_docs_list_every_rendered_option_with_its_value():
    from tests.conftest import ROOT

    doc = (ROOT / "docs" / "planner.md").read_text()
    for row in OPTION_ROWS:
        assert f"| `{row.option}` | `{row.value}` |" in doc, row
