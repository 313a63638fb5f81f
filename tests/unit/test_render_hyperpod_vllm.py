"""The HyperPod worker is what the inference operator runs, checked against things we did not
write: the operator's sample manifests (tests/data/hyperpod/samples, sources in their headers)
and vLLM 0.11.1's own argument parser (tests/data/hyperpod/vllm-0.11.1-flags.txt, extracted
from the vllm==0.11.1 wheel by extract_vllm_flags.py)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from lmikit.catalog._model_options import OPTION_ROWS
from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._env import lmi_environment
from lmikit.render._hyperpod import (
    LMI_METRICS_PATH,
    MODEL_PORT,
    check_operator_fit,
    hyperpod_manifest,
    uses_operator_cache,
)
from lmikit.render._hyperpod_vllm import (
    DEFAULT_IMAGE_CHOICES,
    DEFAULT_VLLM_IMAGE,
    FACTS,
    NOT_FOR_VLLM,
    VLLM_ENV_KEYS,
    VLLM_FLAGS,
    VLLM_VERSION,
)
from lmikit.spec import load_spec, load_spec_text
from tests.conftest import EXAMPLE_SPECS, ROOT, hyperpod_crd_v1, lmcache_would_track_usage
from tests.unit.test_spec import BASE

DATA = ROOT / "tests" / "data" / "hyperpod"
SAMPLES = {p.name: yaml.safe_load(p.read_text()) for p in sorted((DATA / "samples").glob("*.yaml"))}
OPERATOR_SAMPLES = [s for name, s in SAMPLES.items() if name.startswith("operator-")]
BLOG = SAMPLES["aws-blog-kv-cache-routing.yaml"]
LMI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _flags(version: str) -> dict[str, list[str] | None]:
    """vLLM's option strings; for options with a Literal type, their allowed values."""
    out: dict[str, list[str] | None] = {}
    for line in (DATA / f"vllm-{version}-flags.txt").read_text().splitlines():
        if line.startswith("--"):
            flag, _, choices = line.partition("\t")
            out[flag] = choices.split(",") if choices else None
    return out


VLLM = _flags(VLLM_VERSION)


def _render(text: str, **kwargs):
    spec = load_spec_text(text)
    plan = plan_spec(spec)
    return spec, plan, hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE, **kwargs)


# Flags that take several values (nargs="+" in vLLM's parser).
MULTI_VALUE = {"--served-model-name"}


def _pairs(args: list[str]) -> dict[str, str | list[str] | None]:
    """Flag -> value (None for a boolean flag, a list for MULTI_VALUE flags); fails on a value
    without a flag."""
    out: dict[str, str | list[str] | None] = {}
    i = 0
    while i < len(args):
        assert args[i].startswith("--"), f"{args[i]!r} at {i} is not a flag: {args}"
        values = []
        j = i + 1
        while j < len(args) and not args[j].startswith("--"):
            values.append(args[j])
            j += 1
        assert len(values) <= 1 or args[i] in MULTI_VALUE, f"{args[i]} takes one value: {args}"
        out[args[i]] = values if args[i] in MULTI_VALUE else (values[0] if values else None)
        i = j
    return out


KV_SPEC = BASE + "kv_cache:\n  mode: cpu\nrouting:\n  strategy: prefix_aware\n"


def test_hyperpod_vllm_samples_validate_against_the_crd():
    """The vendored samples and the CRD we validate against agree (placeholders aside)."""
    validator = jsonschema.Draft7Validator(hyperpod_crd_v1())
    assert len(OPERATOR_SAMPLES) == 2
    for name, sample in SAMPLES.items():
        sample = copy.deepcopy(sample)
        sample["spec"].pop("tlsConfig", None)  # <PLACEHOLDER_TLS_CERT_S3_URI> in the chart's
        assert [e.message for e in validator.iter_errors(sample)] == [], name
        assert "kvCacheSpec" in sample["spec"]


def test_hyperpod_vllm_worker_has_the_samples_fields():
    worker = _render(KV_SPEC)[2]["spec"]["worker"]
    sample_keys = set().union(*(s["spec"]["worker"] for s in SAMPLES.values()))
    assert set(worker) == sample_keys
    for sample in SAMPLES.values():
        assert set(sample["spec"]["worker"]) <= set(worker)


def test_hyperpod_vllm_worker_port_and_mount_match_the_samples():
    worker = _render(KV_SPEC)[2]["spec"]["worker"]
    for sample in SAMPLES.values():
        assert worker["modelInvocationPort"] == sample["spec"]["worker"]["modelInvocationPort"]
        assert worker["modelVolumeMount"] == sample["spec"]["worker"]["modelVolumeMount"]
    assert worker["modelInvocationPort"] == {"containerPort": 8000, "name": "http"}


def test_hyperpod_vllm_args_follow_the_samples_style():
    args = _render(KV_SPEC)[2]["spec"]["worker"]["args"]
    # The api_server entrypoint of the default image takes the model as a flag (AWS blog).
    assert args[:2] == BLOG["spec"]["worker"]["args"][:2] == ["--model", "/opt/ml/model"]
    # The operator's lmcache/vllm-openai samples pass the same path positionally.
    for sample in OPERATOR_SAMPLES:
        assert sample["spec"]["worker"]["args"][0] == args[1]
    ours = _pairs(args)
    for sample in SAMPLES.values():
        theirs = sample["spec"]["worker"]["args"]
        flags = [a for a in theirs if a.startswith("--") and a != "--model"]
        assert flags and all(ours.get(f) is not None for f in flags), (flags, args)


def test_hyperpod_vllm_image_is_the_blog_sample_and_pins_the_flag_list_version():
    assert DEFAULT_VLLM_IMAGE == BLOG["spec"]["worker"]["image"]
    assert f":{VLLM_VERSION}-" in DEFAULT_VLLM_IMAGE
    fact = {f.name: f.value for f in FACTS}
    assert fact["vLLM version in the worker image"] == VLLM_VERSION
    assert fact["worker image"] == DEFAULT_VLLM_IMAGE
    assert not DEFAULT_VLLM_IMAGE.endswith(":latest")


MODEL_LINE = "Qwen/Qwen2.5-7B-Instruct"
# LoRA runs on the vLLM worker only without the operator's KV cache (routing alone): with it,
# the manifest is refused (tests/formatters/test_lora_isolation_paths.py).
RICH = BASE.replace(MODEL_LINE, f"{MODEL_LINE}\n  revision: {SHA}") + """\
engine:
  kv_cache_dtype: fp8
  max_batch_size: 48
  gpu_memory_utilization: 0.85
  lora:
    enabled: true
    max_rank: 40
    max_adapters: 6
  speculative:
    method: eagle3
    draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
kv_cache:
  mode: "off"
routing:
  strategy: kv_aware
"""


@pytest.mark.parametrize("text", [KV_SPEC, RICH], ids=["plain", "rich"])
def test_hyperpod_vllm_every_arg_is_a_real_vllm_flag(text):
    args = _render(text)[2]["spec"]["worker"]["args"]
    for flag, value in _pairs(args).items():
        positive = "--" + flag[len("--no-"):] if flag.startswith("--no-") else flag
        assert positive in VLLM, f"{flag} is not a vLLM {VLLM_VERSION} option"
        choices = VLLM[positive]
        if choices is not None:
            assert value in choices, f"{flag} {value!r} not in vLLM's {choices}"


def test_hyperpod_vllm_args_carry_the_spec_numbers():
    spec, plan, manifest = _render(RICH)
    worker = manifest["spec"]["worker"]
    args = _pairs(worker["args"])
    assert args["--tensor-parallel-size"] == worker["resources"]["limits"]["nvidia.com/gpu"]
    assert args["--max-model-len"] == str(plan.max_model_len)
    assert args["--max-num-seqs"] == "48"  # engine.max_batch_size
    assert args["--gpu-memory-utilization"] == "0.85"
    assert args["--kv-cache-dtype"] == "fp8"
    assert args["--port"] == str(worker["modelInvocationPort"]["containerPort"])
    assert "--enable-lora" in args and args["--enable-lora"] is None
    # vLLM accepts only its listed ranks: 40 rounds up to the next one, 64.
    assert args["--max-lora-rank"] == "64"
    assert args["--max-loras"] == "6"
    assert int(args["--max-cpu-loras"]) >= 6
    assert json.loads(args["--speculative-config"]) == {
        "method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 4}


def test_hyperpod_vllm_args_are_the_lmi_options_under_vllm_names():
    spec, plan, manifest = _render(RICH)
    env = lmi_environment(spec, plan)
    args = _pairs(manifest["spec"]["worker"]["args"])
    for option, flag in VLLM_FLAGS.items():
        assert option in env
        assert args[flag] == (None if env[option] == "true" else env[option])


def test_hyperpod_vllm_every_lmi_option_is_mapped_or_left_out_on_purpose():
    specs = [load_spec(p) for p in EXAMPLE_SPECS] + [load_spec_text(RICH), load_spec_text(KV_SPEC)]
    for spec in specs:
        for key in lmi_environment(spec, plan_spec(spec, base_dir=ROOT / "examples")):
            known = key in VLLM_FLAGS or key in NOT_FOR_VLLM or key in VLLM_ENV_KEYS
            # LMCACHE_*: the operator strips the user's and injects its own (FACTS).
            assert known or key.startswith(("LMIKIT_", "LMCACHE_")), \
                f"{key}: map it to a flag or say why not"


def test_hyperpod_vllm_revision_is_pinned_by_commit_sha():
    manifest = _render(RICH)[2]
    assert manifest["spec"]["modelSourceConfig"]["huggingFaceModel"]["commitSHA"] == SHA
    assert "--revision" not in manifest["spec"]["worker"]["args"]
    branch = KV_SPEC.replace(MODEL_LINE, f"{MODEL_LINE}\n  revision: main")
    with pytest.raises(RenderError, match=r"model.revision 'main'.*commitSHA"):
        _render(branch)


def test_hyperpod_vllm_leaves_lmcache_to_the_operator_like_the_samples():
    worker = _render(KV_SPEC)[2]["spec"]["worker"]
    for w in [worker] + [s["spec"]["worker"] for s in SAMPLES.values()]:
        assert not any("kv-transfer-config" in a or "prefix-caching" in a for a in w["args"])
        assert not any(e["name"].startswith("LMCACHE_") and e["name"] != "LMCACHE_TRACK_USAGE"
                       for e in w.get("environmentVariables", []))
    assert worker["environmentVariables"] == [
        {"name": "DO_NOT_TRACK", "value": "1"}, {"name": "LMCACHE_TRACK_USAGE", "value": "false"},
        {"name": "PYTHONHASHSEED", "value": "0"}]


@pytest.mark.parametrize("switch", ["LMCACHE_TRACK_USAGE", "DO_NOT_TRACK"])
def test_hyperpod_vllm_worker_turns_lmcache_telemetry_off_by_either_switch(switch, monkeypatch):
    """LMCache sends usage messages (remote URL, model name) over plain HTTP unless told not
    to (LMCache 0.5.6 usage_telemetry/identity.py is_usage_tracking_enabled). The operator may
    drop user LMCACHE_* variables (not verified: it is closed source), so the worker also gets
    DO_NOT_TRACK, which LMCache honours from 0.5.2; each alone turns telemetry off."""
    assert lmcache_would_track_usage({}, monkeypatch)
    for strategy in ("prefix_aware", "kv_aware"):
        worker = _render(KV_SPEC.replace("prefix_aware", strategy))[2]["spec"]["worker"]
        env = {e["name"]: e["value"] for e in worker["environmentVariables"]}
        assert not lmcache_would_track_usage({switch: env[switch]}, monkeypatch)


def test_hyperpod_vllm_routing_only_passes_prefix_caching_off_when_asked():
    text = BASE + "kv_cache:\n  mode: \"off\"\nengine:\n  enable_prefix_caching: false\n"
    args = _render(text)[2]["spec"]["worker"]["args"]
    assert "--no-enable-prefix-caching" in args


def test_hyperpod_vllm_metrics_scrape_the_port_and_path_vllm_serves():
    body = _render(KV_SPEC)[2]["spec"]
    port = body["worker"]["modelInvocationPort"]["containerPort"]
    assert body["metrics"] == {"enabled": True,
                               "modelMetrics": {"path": "/metrics", "port": port}}
    blog = BLOG["spec"]
    assert blog["metrics"]["modelMetrics"]["port"] == blog["worker"]["modelInvocationPort"][
        "containerPort"]


def test_hyperpod_vllm_health_check_and_endpoint_match_the_samples():
    body = _render(KV_SPEC)[2]["spec"]
    for sample in SAMPLES.values():
        assert body["invocationEndpoint"] == sample["spec"]["invocationEndpoint"]
    checks = {s["spec"]["loadBalancer"]["healthCheckPath"] for s in SAMPLES.values()
              if "loadBalancer" in s["spec"]}
    assert checks == {body["loadBalancer"]["healthCheckPath"]} == {"/health"}
    kv_aware = _render(KV_SPEC.replace("prefix_aware", "kv_aware"))[2]["spec"]
    assert kv_aware["invocationEndpoint"] == "v1/completions"


def test_hyperpod_lmi_metrics_use_djl_prometheus_endpoint():
    text = BASE + "kv_cache:\n  mode: \"off\"\nrouting:\n  strategy: least_outstanding\n"
    body = _render(text)[2]["spec"]
    env = {e["name"]: e["value"] for e in body["worker"]["environmentVariables"]}
    assert body["worker"]["modelInvocationPort"]["containerPort"] == MODEL_PORT == 8080
    assert body["metrics"] == {"enabled": True,
                               "modelMetrics": {"path": LMI_METRICS_PATH, "port": 8080}}
    assert env["SERVING_PROMETHEUS"] == "true"
    quiet = _render(text + "observability:\n  detailed_metrics: false\n")[2]["spec"]
    assert quiet["metrics"] == {"enabled": False}
    assert "SERVING_PROMETHEUS" not in {e["name"] for e in quiet["worker"]["environmentVariables"]}


MODES = ["off", "cpu", "auto"]
STRATEGIES = ["sticky_session", "prefix_aware", "kv_aware", "least_outstanding", "random"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hyperpod_worker_kind_follows_cache_and_routing(mode, strategy):
    text = BASE + f"kv_cache:\n  mode: \"{mode}\"\nrouting:\n  strategy: {strategy}\n"
    spec, plan, manifest = _render(text)
    body = manifest["spec"]
    vllm = body["worker"]["modelInvocationPort"]["containerPort"] == 8000
    cache = body["kvCacheSpec"]
    assert vllm == (cache["enableL1Cache"] or cache["enableL2Cache"]
                    or "intelligentRoutingSpec" in body)
    assert vllm == uses_operator_cache(spec, plan)
    assert body["worker"]["image"] == (DEFAULT_VLLM_IMAGE if vllm else LMI_IMAGE)


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_hyperpod_examples_fit_the_operator(path):
    spec = load_spec(path)
    check_operator_fit(hyperpod_manifest(spec, plan_spec(spec, base_dir=path.parent),
                                         image_uri=LMI_IMAGE))


def _lmi_manifest():
    return _render(BASE + "kv_cache:\n  mode: \"off\"\nrouting:\n  strategy: random\n")[2]


def test_hyperpod_lmi_worker_with_kv_cache_is_refused():
    manifest = _lmi_manifest()
    check_operator_fit(manifest)
    manifest["spec"]["kvCacheSpec"] = {"enableL1Cache": True, "enableL2Cache": False}
    with pytest.raises(RenderError, match="kvCacheSpec is on but the worker is not vLLM"):
        check_operator_fit(manifest)


def test_hyperpod_lmi_worker_with_intelligent_routing_is_refused():
    manifest = _lmi_manifest()
    manifest["spec"]["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": "session"}
    with pytest.raises(RenderError, match="intelligentRoutingSpec is on but the worker"):
        check_operator_fit(manifest)


def test_hyperpod_lmi_image_as_vllm_image_is_refused():
    with pytest.raises(RenderError, match="not vLLM's OpenAI server"):
        _render(KV_SPEC, vllm_image=LMI_IMAGE)


def test_hyperpod_metrics_on_another_port_are_refused():
    manifest = _render(KV_SPEC)[2]
    bad = copy.deepcopy(manifest)
    bad["spec"]["metrics"]["modelMetrics"]["port"] = 8080
    with pytest.raises(RenderError, match="modelMetrics.port 8080 is not the worker's port 8000"):
        check_operator_fit(bad)


def test_hyperpod_vllm_image_is_configurable_and_pinned():
    image = "lmcache/vllm-openai:v0.3.7"
    assert _render(KV_SPEC, vllm_image=image)[2]["spec"]["worker"]["image"] == image
    with pytest.raises(RenderError, match="'latest' is not pinned"):
        _render(KV_SPEC, vllm_image="lmcache/vllm-openai:latest")
    with pytest.raises(RenderError, match="must name a pinned tag or digest"):
        _render(KV_SPEC, vllm_image="lmcache/vllm-openai")


def test_hyperpod_facts_table_names_its_sources_and_the_docs_list_it():
    docs = (ROOT / "docs" / "hyperpod.md").read_text()
    for fact in FACTS:
        assert fact.value and len(fact.source) > 20
        assert fact.name in docs, f"docs/hyperpod.md does not list {fact.name!r}"


def test_hyperpod_vllm_flag_list_is_vllms():
    # Spot-check the extracted list against options vLLM's docs and the samples use.
    for flag in ("--model", "--port", "--tensor-parallel-size", "--max-model-len",
                 "--kv-transfer-config", "--enable-prefix-caching"):
        assert flag in VLLM
    assert "--max-rolling-batch-size" not in VLLM and "--tensor-parallel-degree" not in VLLM
    assert Path(DATA / "extract_vllm_flags.py").exists()


def test_hyperpod_default_image_choices_are_vllms_own():
    """The renderer's table of the default image's fixed-value flags is vLLM 0.11.1's, and
    covers every fixed-value flag a catalog model option renders."""
    for flag, allowed in DEFAULT_IMAGE_CHOICES.items():
        assert VLLM[flag] == list(allowed), flag
    for row in OPTION_ROWS:
        flag = "--" + row.option.replace("_", "-")
        assert flag in VLLM, flag
        if VLLM[flag] is not None:
            assert flag in DEFAULT_IMAGE_CHOICES, flag


MODEL_EXAMPLES = sorted((ROOT / "examples" / "models").glob("*.yaml"))


def _vllm_worker_text(path: Path) -> str:
    """The model example with intelligent routing, which needs the vLLM worker."""
    text = path.read_text().replace("strategy: least_outstanding", "strategy: prefix_aware")
    return text if "strategy: prefix_aware" in text else text + "routing:\n  strategy: " \
        "prefix_aware\n"


@pytest.mark.parametrize("path", MODEL_EXAMPLES, ids=lambda p: p.name)
def test_hyperpod_model_options_start_on_the_default_image_or_it_is_not_used(path):
    """vLLM builds argparse choices from a Literal type (literal_to_kwargs, vLLM 0.11.1
    vllm/engine/arg_utils.py): a value outside them stops the server before it serves. Where
    the default image's vLLM would, lmikit runs a newer image (test_hyperpod_images.py)."""
    spec = load_spec_text(_vllm_worker_text(path))
    plan = plan_spec(spec, base_dir=path.parent)
    manifest = hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE)
    if manifest["spec"]["worker"]["image"] != DEFAULT_VLLM_IMAGE:
        return
    for flag, value in _pairs(manifest["spec"]["worker"]["args"]).items():
        allowed = VLLM.get(flag)
        assert allowed is None or value in allowed, (flag, value)


def test_hyperpod_deepseek_v32_tokenizer_mode_needs_a_newer_vllm_image():
    path = ROOT / "examples" / "models" / "deepseek-v3.2-p5e.yaml"
    spec = load_spec_text(_vllm_worker_text(path))
    plan = plan_spec(spec, base_dir=path.parent)
    with pytest.raises(RenderError, match=r"runs vLLM 0.11.1, but deepseek-ai/DeepSeek-V3.2 "
                                          r"needs vLLM >= 0.13.0 \(--tokenizer-mode "
                                          r"deepseek_v32"):
        hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE, vllm_image=DEFAULT_VLLM_IMAGE)
    picked = hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE)["spec"]["worker"]
    assert picked["image"] != DEFAULT_VLLM_IMAGE
    assert _pairs(picked["args"])["--tokenizer-mode"] == "deepseek_v32"
    newer = hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE,
                              vllm_image="vllm/vllm-openai:v0.23.0")
    assert _pairs(newer["spec"]["worker"]["args"])["--tokenizer-mode"] == "deepseek_v32"
    # Without the operator's cache and routing the LMI worker carries the option (LMI's vLLM).
    lmi = hyperpod_manifest(load_spec(path), plan_spec(load_spec(path), base_dir=path.parent),
                            image_uri=LMI_IMAGE)
    env = {e["name"]: e["value"] for e in lmi["spec"]["worker"]["environmentVariables"]}
    assert env["OPTION_TOKENIZER_MODE"] == "deepseek_v32"


def test_hyperpod_vllm_serves_the_model_under_its_id_and_the_mount_path():
    """vLLM answers to every --served-model-name and reports the first; without the flag it
    answers only to --model, /opt/ml/model (vLLM 0.11.1 init_app_state), and a request naming
    the Hugging Face id gets 404 "The model ... does not exist" (serving_engine._check_model).
    The operator's samples set none, so their clients send /opt/ml/model: both work."""
    spec, _, manifest = _render(KV_SPEC)
    args = _pairs(manifest["spec"]["worker"]["args"])
    assert args["--served-model-name"] == [spec.model.id, "/opt/ml/model"]
    assert args["--model"] == "/opt/ml/model"
    for sample in SAMPLES.values():
        assert not any("served-model-name" in a for a in sample["spec"]["worker"]["args"])
    docs = (ROOT / "docs" / "hyperpod.md").read_text()
    assert "## Which model name clients send" in docs


def test_hyperpod_docs_name_exactly_the_samples_the_tests_compare():
    """docs/hyperpod.md and the README describe what the tests compare, no more: the
    operator's two Helm-chart samples and AWS's blog sample, all three vLLM workers."""
    docs = (ROOT / "docs" / "hyperpod.md").read_text()
    assert set(re.findall(r"tests/data/hyperpod/samples/([\w.-]+\.yaml)", docs)) == set(SAMPLES)
    assert len(SAMPLES) == 3 and len(OPERATOR_SAMPLES) == 2
    assert all("vllm" in s["spec"]["worker"]["image"] for s in SAMPLES.values())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert ("compare the vLLM worker with the operator's two Helm-chart samples and AWS's blog "
            "sample (`tests/data/hyperpod/samples/`)") in readme
