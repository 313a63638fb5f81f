from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from lmikit.accept._accept import TARGETS
from lmikit.cli import main
from tests.conftest import DEFAULT_SPEC, EXAMPLE_SPECS


@pytest.fixture()
def run():
    runner = CliRunner()

    def _run(*args: str):
        return runner.invoke(main, list(args), catch_exceptions=False)
    return _run


def test_cli_help_lists_commands(run):
    result = run("--help")
    assert result.exit_code == 0
    for name in ("plan", "render", "validate", "schema", "deploy", "adapters"):
        assert name in result.output


def test_cli_plan_table_for_default_spec(run):
    result = run("plan", str(DEFAULT_SPEC))
    assert result.exit_code == 0
    assert "Qwen/Qwen2.5-7B-Instruct" in result.output
    assert "Assumptions" in result.output and "TTFT on a miss" in result.output


def test_cli_plan_json_what_if(run):
    result = run("plan", "--model", "Qwen/Qwen2.5-72B-Instruct", "--instance",
                 "ml.p4de.24xlarge", "--tp", "4", "--context", "1000000", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["kv_bytes_per_token"] == 320 * 1024
    assert data["tier"] == "cpu"
    assert data["predicted"]["speedup"]["cpu"] > 1


def test_cli_plan_request_tokens_changes_prediction(run):
    def miss(n: str) -> float:
        out = run("plan", "--model", "Qwen/Qwen3-8B", "--instance", "ml.p5.48xlarge",
                  "--request-tokens", n, "--json").output
        return json.loads(out)["predicted"]["ttft_miss_s"]
    assert miss("32000") > miss("4000")


def test_cli_plan_needs_spec_or_model(run):
    result = run("plan", "--model", "Qwen/Qwen3-8B")
    assert result.exit_code == 2
    assert "--instance" in result.output


def test_cli_plan_error_is_one_line_without_traceback(run):
    result = run("plan", "--model", "Qwen/Qwen2.5-72B-Instruct", "--instance", "ml.g6e.2xlarge")
    assert result.exit_code == 2
    assert result.output.startswith("PlanError: ")
    assert "Traceback" not in result.output


def test_cli_unknown_model_error_names_config_path(run):
    result = run("plan", "--model", "acme/secret", "--instance", "ml.g6e.2xlarge")
    assert result.exit_code == 2
    assert "CatalogError:" in result.output and "model.config_path" in result.output


def test_cli_validate_bad_spec_lists_problems(run, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT_SPEC.read_text().replace("strategy: sticky_session",
                                                    "strategy: sticky"))
    result = run("validate", str(bad))
    assert result.exit_code == 2
    assert "SpecError:" in result.output
    assert "routing.strategy" in result.output and "bad.yaml:" in result.output


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_cli_validate_examples(run, path):
    result = run("validate", str(path))
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_validate_of_a_shipped_example_warns_of_nothing(path):
    """A warning every example triggers is noise: what the stock image leaves out is one
    note that says what to change, and with lmikit's image there is nothing to say, beside
    the one note for a Hub model whose gate the catalog could not establish."""
    from lmikit.render._hub_token import gating_note
    from lmikit.spec._loader import load_spec

    gate = gating_note(load_spec(path))
    gate_lines = [f"Note: {gate}"] if gate else []
    stock = CliRunner().invoke(main, ["validate", str(path)])
    assert stock.exit_code == 0, stock.output
    assert "Warning" not in stock.stderr
    note, *notes = stock.stderr.splitlines()
    assert notes == gate_lines
    assert note.startswith("Note: checked for AWS's stock LMI image, which `lmikit deploy` "
                           "runs") and note.endswith("`--image lmikit` checks for it")
    lmikit = CliRunner().invoke(main, ["validate", str(path), "--image", "lmikit"])
    assert lmikit.exit_code == 0 and lmikit.stderr.splitlines() == gate_lines


def test_cli_render_lmcache_is_yaml(run):
    result = run("render", str(DEFAULT_SPEC), "--target", "lmcache")
    assert result.exit_code == 0
    assert yaml.safe_load(result.output)["local_cpu"] is True


def test_cli_render_env_is_json(run):
    result = run("render", str(DEFAULT_SPEC), "-t", "env")
    assert json.loads(result.output)["PYTHONHASHSEED"] == "0"


def test_cli_schema_is_a_valid_json_schema(run):
    schema = json.loads(run("schema").output)
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = yaml.safe_load(DEFAULT_SPEC.read_text())
    jsonschema.validate(doc, schema)


def test_cli_render_hyperpod_is_a_manifest(run):
    result = run("render", str(DEFAULT_SPEC), "--target", "hyperpod", "--namespace", "ml")
    assert result.exit_code == 0
    manifest = yaml.safe_load(result.output)
    assert manifest["kind"] == "InferenceEndpointConfig"
    assert manifest["metadata"]["namespace"] == "ml"
    assert "# note: intelligentRoutingSpec.enabled cannot be changed" in result.output


def test_cli_render_hyperpod_vllm_image_option(run):
    image = "lmcache/vllm-openai:v0.3.7"
    result = run("render", str(DEFAULT_SPEC), "-t", "hyperpod", "--vllm-image", image)
    assert yaml.safe_load(result.output)["spec"]["worker"]["image"] == image
    bad = run("render", str(DEFAULT_SPEC), "-t", "hyperpod",
              "--vllm-image", "vllm/vllm-openai:latest")
    assert bad.exit_code != 0
    assert bad.output.startswith("RenderError: ")
    assert "hyperpod: vllm_image 'vllm/vllm-openai:latest'" in bad.output


def test_cli_render_sagemaker_requests(run):
    data = json.loads(run("render", str(DEFAULT_SPEC), "-t", "sagemaker").stdout)
    assert "ModelName" not in data["CreateEndpointConfig"]["ProductionVariants"][0]
    assert data["CreateInferenceComponent"]["Specification"]["Container"]["Image"].startswith(
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0")


@pytest.mark.parametrize("target", TARGETS)
def test_cli_render_output_creates_missing_folders_for_every_target(run, tmp_path, target):
    out = tmp_path / "new" / "deeper" / f"{target}.txt"
    result = run("render", str(DEFAULT_SPEC), "-t", target, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"Created {out.parent}/" in result.output and f"Wrote {out}" in result.output
    assert out.read_text() == run("render", str(DEFAULT_SPEC), "-t", target).stdout


def test_cli_render_output_under_a_file_is_a_clear_error(run, tmp_path):
    (tmp_path / "file").write_text("x")
    result = run("render", str(DEFAULT_SPEC), "-t", "env", "-o", str(tmp_path / "file" / "o"))
    assert result.exit_code == 1
    assert f"Could not open file '{tmp_path / 'file' / 'o'}': {tmp_path / 'file'} is not a " \
        "folder" in result.output


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nosort -F _lmikit_completion lmikit"),
    ("zsh", "compdef _lmikit_completion lmikit"),
    ("fish", "complete --no-files --command lmikit"),
])
def test_cli_completion_script_generates(shell, marker):
    """What the README tells users to source: click's completion script for each shell."""
    result = CliRunner().invoke(main, [], prog_name="lmikit",
                                env={"_LMIKIT_COMPLETE": f"{shell}_source"})
    assert result.exit_code == 0
    assert marker in result.output and "_LMIKIT_COMPLETE" in result.output


def test_cli_completion_completes_the_lazy_subcommands():
    result = CliRunner().invoke(main, [], prog_name="lmikit", env={
        "_LMIKIT_COMPLETE": "bash_complete", "COMP_WORDS": "lmikit re", "COMP_CWORD": "1"})
    assert result.exit_code == 0
    assert result.output.split() == ["plain,render"]


def test_cli_plan_what_if_takes_the_tier_sizes(run):
    """--cpu-size-gb and --disk-size-gb are the spec's kv_cache sizes: a CPU tier smaller
    than the working set sends it to the disk tier."""
    out = run("plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--instance", "ml.g6e.2xlarge",
              "--context", "400000", "--json")
    assert json.loads(out.output)["tier"] == "cpu"  # 400K fit the auto CPU tier (592K)
    small = run("plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--instance", "ml.g6e.2xlarge",
                "--context", "400000", "--cpu-size-gb", "10", "--disk-size-gb", "100",
                "--json")
    data = json.loads(small.output)
    assert data["tier"] == "cpu+disk"
    assert (data["lmcache"]["max_local_cpu_size_gb"],
            data["lmcache"]["max_local_disk_size_gb"]) == (10.0, 100.0)


def test_cli_plan_refuses_a_tier_size_the_host_cannot_give():
    from click.testing import CliRunner

    from lmikit.cli import main

    r = CliRunner().invoke(main, ["plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--instance",
                                  "ml.g6e.2xlarge", "--cpu-size-gb", "500"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "--cpu-size-gb" in r.output and "exceeds the 31.6 GB per worker" in r.output
    r = CliRunner().invoke(main, ["plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--instance",
                                  "ml.g6e.2xlarge", "--disk-size-gb", "-3"])
    assert r.exit_code == 2 and "'-3' is not 'auto' or a size in GB" in r.output


def test_validate_refuses_kv_aware_for_sagemaker_and_keeps_it_for_hyperpod(tmp_path):
    """KV_AWARE works only with supported containers (botocore RoutingStrategy), not LMI;
    the HyperPod operator's kvaware routing is its own and stays valid."""
    spec = tmp_path / "kv.yaml"
    spec.write_text(DEFAULT_SPEC.read_text().replace("strategy: sticky_session",
                                                     "strategy: kv_aware"))
    assert "kv_aware" in spec.read_text()
    refused = CliRunner().invoke(main, ["validate", str(spec)])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert ("sagemaker: routing.strategy 'kv_aware' cannot be used on SageMaker with the LMI "
            "image") in refused.output
    hyperpod = CliRunner().invoke(main, ["validate", str(spec), "--target", "hyperpod"])
    assert hyperpod.exit_code == 0, hyperpod.output


def test_render_sagemaker_for_lmikits_image_names_no_stock_image(run):
    """lmikit's image has no URI before `cdk deploy` builds it (cdk LmiImage: a Docker asset
    FROM the stock image): the render names a placeholder that says so, never the stock URI
    next to environment only lmikit's image reads; the stock render keeps the stock URI."""
    from lmikit.catalog._images import lmi_image_uri
    from lmikit.spec._loader import load_spec

    spec = load_spec(DEFAULT_SPEC)
    stock_uri = lmi_image_uri(spec.region, spec.engine.lmi_version)

    def image_and_env(*extra):
        body = json.loads(run("render", str(DEFAULT_SPEC), "-t", "sagemaker", *extra).output)
        container = body["CreateInferenceComponent"]["Specification"]["Container"]
        return container["Image"], container["Environment"]

    image, env = image_and_env("--image", "lmikit")
    assert image == ("<lmikit-image-built-by-cdk-deploy-from-container/Dockerfile-FROM-"
                     f"{stock_uri}>")
    assert any(k.startswith("LMIKIT_") and k != "LMIKIT_MODEL_ID" for k in env)
    image, env = image_and_env()
    assert image == stock_uri
    assert not any(k.startswith("LMIKIT_") and k != "LMIKIT_MODEL_ID" for k in env)


def test_plan_and_simulate_judge_the_sagemaker_deployment_not_hyperpods(tmp_path):
    """LoRA next to the operator's LMCache is refused by the HyperPod manifest only
    (lmikit.render._hyperpod.check_lora_isolation): plan and simulate of a SageMaker spec with
    adapters still answer; validate names the HyperPod refusal, and --target hyperpod
    refuses."""
    from lmikit.testing import write_lora_adapter

    write_lora_adapter(tmp_path / "adapters" / "legal")
    spec = tmp_path / "spec.yaml"
    spec.write_text("api_version: v1\nname: demo\nregion: us-east-1\n"
                    "model: {id: Qwen/Qwen2.5-7B-Instruct}\ninstance: {type: ml.g6e.2xlarge}\n"
                    "adapters:\n  - {name: legal, source: adapters/legal}\n")
    runner = CliRunner()
    planned = runner.invoke(main, ["plan", str(spec), "--json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.output)["tier"] == "cpu"
    simulated = runner.invoke(main, ["simulate", str(spec), "--workload", "long-doc-qa",
                                     "--documents", "10"])
    assert simulated.exit_code == 0, simulated.output
    for args in (["validate", str(spec)], ["plan", str(spec), "--target", "hyperpod"]):
        refused = runner.invoke(main, args)
        assert refused.exit_code == 2 and "Traceback" not in refused.output
        assert "hyperpod: LoRA adapters" in refused.output
