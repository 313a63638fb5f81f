from __future__ import annotations

import re

import pytest
import yaml

from lmikit.errors import SpecError
from lmikit.spec._loader import load_spec, load_spec_text
from lmikit.spec._model import RESERVED_METRICS_PATHS, DeploymentSpec
from tests.conftest import DEFAULT_SPEC, EXAMPLE_SPECS

BASE = """\
api_version: v1
name: docqa
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
"""


def _errors(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, source="s.yaml")
    return info.value


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_load_spec_examples_are_valid(path):
    spec = load_spec(path)
    assert isinstance(spec, DeploymentSpec)
    assert spec.api_version == "v1"


def test_load_spec_defaults_follow_routing():
    spec = load_spec_text(BASE)
    assert spec.routing.strategy == "sticky_session"
    assert spec.sessions_enabled is True
    assert spec.kv_cache.mode == "auto"
    assert spec.kv_cache.cpu_size_gb == "auto"


def test_load_spec_reports_every_problem_with_line_and_value():
    err = _errors(BASE.replace("name: docqa", "name: doc_qa").replace(
        "  type: ml.g6e.2xlarge", "  type: ml.g6e.2xlarge\n  min_count: 3\n  max_count: 2"))
    text = str(err)
    assert len(err.problems) == 2
    assert "name (s.yaml:2)" in text and "'doc_qa'" in text
    assert "instance.min_count (s.yaml:8): must not exceed instance.max_count (2) [got 3]" in text


def test_load_spec_unknown_key_suggests_the_allowed_one():
    err = _errors(BASE + "routing:\n  strategy: prefix_aware\n  prefix_lenght: 4096\n")
    (problem,) = err.problems
    assert problem.path == "routing.prefix_lenght"
    assert problem.line == 10
    assert "did you mean 'prefix_length'?" in problem.message
    assert "concurrency_threshold" in problem.message


def test_load_spec_misspelt_required_field_is_one_problem_not_two():
    err = _errors(BASE.replace("  type: ml.g6e.2xlarge", "  tpye: ml.g6e.2xlarge"))
    (problem,) = err.problems
    assert problem.path == "instance.tpye"
    assert "did you mean 'type'?" in problem.message


def test_load_spec_missing_field_next_to_an_unrelated_unknown_one_is_still_named():
    err = _errors(BASE.replace("  type: ml.g6e.2xlarge", "  colour: blue"))
    assert {p.path for p in err.problems} == {"instance.colour", "instance.type"}


def test_load_spec_bad_enum_lists_allowed_values():
    err = _errors(BASE + "kv_cache:\n  mode: cpu+disc\n")
    (problem,) = err.problems
    assert problem.value == "cpu+disc"
    assert "'cpu+disk'" in problem.message and "'remote'" in problem.message


def test_load_spec_missing_fields_are_all_named():
    err = _errors("api_version: v1\nname: x\n")
    assert sorted(p.path for p in err.problems) == ["instance", "model", "region"]


def test_load_spec_rejects_duplicate_keys():
    err = _errors(BASE + "name: again\n")
    assert err.problems[0].path == "name"
    assert "given twice (first on line 2)" in err.problems[0].message


def test_load_spec_yaml_syntax_error_has_a_line():
    err = _errors(BASE + "kv_cache: [unclosed\n")
    assert err.problems[0].message.startswith("invalid YAML")
    assert err.problems[0].line is not None


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "42\n", "null\n"])
def test_load_spec_non_mapping_is_a_spec_error(text):
    err = _errors(text)
    assert err.problems


def test_load_spec_in_memory_only_forbids_disk_and_remote():
    err = _errors(BASE + "kv_cache:\n  mode: cpu+disk\n  in_memory_only: true\n"
                  "  disk_size_gb: 100\n")
    paths = {p.path for p in err.problems}
    assert paths == {"kv_cache.mode", "kv_cache.disk_size_gb"}
    assert all("in_memory_only" in p.message for p in err.problems)


def test_load_spec_remote_mode_needs_url():
    err = _errors(BASE + "kv_cache:\n  mode: remote\n")
    assert err.problems[0].path == "kv_cache.remote_url"
    assert "redis://" in err.problems[0].message


def test_load_spec_prefix_settings_need_prefix_aware():
    err = _errors(BASE + "routing:\n  strategy: random\n  prefix_length: 4096\n")
    assert err.problems[0].path == "routing.prefix_length"
    assert err.problems[0].line == 10


def test_load_spec_sticky_routing_needs_sessions():
    err = _errors(BASE + "sessions:\n  enabled: false\n")
    assert err.problems[0].path == "sessions.enabled"
    assert err.problems[0].value is False


def test_load_spec_duplicate_adapter_names():
    err = _errors(BASE + "adapters:\n  - {name: a, source: x}\n  - {name: a, source: y}\n")
    assert err.problems[0].path == "adapters.1.name"


def test_load_spec_network_isolation_needs_s3_weights():
    err = _errors(BASE + "security:\n  network_isolation: true\n")
    assert err.problems[0].path == "security.network_isolation"
    assert "s3://" in err.problems[0].message


@pytest.mark.parametrize("value", ["0", "-1", "big", ".nan", "true"])
def test_load_spec_size_must_be_auto_or_positive(value):
    err = _errors(BASE + f"kv_cache:\n  mode: cpu\n  cpu_size_gb: {value}\n")
    assert err.problems[0].path == "kv_cache.cpu_size_gb"
    assert "'auto' or a size in GB" in err.problems[0].message


def test_load_spec_plaintext_token_has_no_field():
    err = _errors(BASE + "security:\n  hf_token: hf_abc\n")
    assert "hf_token_secret_arn" in err.problems[0].message


def test_load_spec_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="cannot read the spec file"):
        load_spec(tmp_path / "nope.yaml")


def test_default_spec_round_trips_through_yaml():
    spec = load_spec(DEFAULT_SPEC)
    again = load_spec_text(yaml.safe_dump(spec.model_dump(mode="json")))
    assert again == spec


def test_load_spec_lora_disabled_with_adapters_is_an_error():
    err = _errors(BASE + "engine:\n  lora: {enabled: false}\n"
                  "adapters:\n  - {name: a, source: x}\n")
    assert err.problems[0].path == "engine.lora.enabled"


def test_load_spec_adapter_rank_above_lora_limit():
    err = _errors(BASE + "engine:\n  lora: {max_rank: 16}\n"
                  "adapters:\n  - {name: a, source: x, rank: 64}\n")
    assert err.problems[0].path == "adapters.0.rank"
    assert "engine.lora.max_rank (16)" in err.problems[0].message


@pytest.mark.parametrize("path", [p + tail for p in RESERVED_METRICS_PATHS
                                  for tail in ("", "/", "/x")])
def test_spec_metrics_path_reserved_by_lmi_or_sagemaker_is_refused(path):
    text = DEFAULT_SPEC.read_text() + f"observability:\n  metrics_path: {path}\n"
    with pytest.raises(SpecError, match=r"observability.metrics_path \(s.yaml:\d+\): /\S+ is "
                       r"answered by LMI \(djl-serving\) or SageMaker itself.*\[got '"
                       + re.escape(path) + "'"):
        load_spec_text(text, "s.yaml")


@pytest.mark.parametrize("path", ["/metrics", "/pingx", "/models-metrics", "/v1/models",
                                  "/lmikit/metrics", "/a.b/c_d-e"])
def test_spec_metrics_path_outside_the_reserved_ones_is_accepted(path):
    text = DEFAULT_SPEC.read_text() + f"observability:\n  metrics_path: {path}\n"
    assert load_spec_text(text, "s.yaml").observability.metrics_path == path



@pytest.mark.parametrize(("path", "message"), [
    ("/", "must be a path that starts with / and holds letters, digits and / _ . -"),
    ("/a/../metrics", "must not contain '..'"),
    ("/" + "m" * 256, "at most 256 characters"),
])
def test_spec_metrics_path_follows_sagemakers_metrics_endpoint_path(path, message):
    """botocore's MetricsEndpointPath: /(?!.*\\.\\.)[a-zA-Z0-9/_.\\-]+, at most 256."""
    text = DEFAULT_SPEC.read_text() + f"observability:\n  metrics_path: '{path}'\n"
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec_text(text, "s.yaml")


@pytest.mark.parametrize("url", ["s3://kv-cache", "s3://kv-cache/prefix",
                                 "s3://kv-cache.s3.us-east-1.amazonaws.com/prefix",
                                 "s3://s3.us-east-1.amazonaws.com"])
def test_load_spec_s3_remote_url_must_be_the_buckets_endpoint(url):
    """LMCache 0.5.6's S3Connector strips "s3://" and sends every request to the rest as
    its host (s3_connector.py), and S3ConnectorAdapter asserts extra_config.s3_region
    (s3_adapter.py): only a bucket's virtual-hosted endpoint works, and gives the region."""
    err = _errors(BASE + f"kv_cache:\n  mode: remote\n  remote_url: {url}\n")
    (problem,) = err.problems
    assert problem.path == "kv_cache.remote_url"
    assert "s3://BUCKET.s3.REGION.amazonaws.com" in problem.message


def test_load_spec_s3_remote_url_at_the_buckets_endpoint_loads():
    spec = load_spec_text(BASE + "kv_cache:\n  mode: remote\n"
                          "  remote_url: s3://kv-cache.s3.us-west-2.amazonaws.com\n")
    assert spec.kv_cache.remote_url == "s3://kv-cache.s3.us-west-2.amazonaws.com"


def test_load_spec_refuses_a_mooncake_remote_tier_it_cannot_configure():
    """LMCache's Mooncake connector reads its servers from MOONCAKE_CONFIG_PATH or
    extra_config (mooncakestore_connector.py raises without them); lmikit renders neither."""
    err = _errors(BASE + "kv_cache:\n  mode: remote\n  remote_url: mooncakestore://m:50051\n")
    (problem,) = err.problems
    assert problem.path == "kv_cache.remote_url" and "MOONCAKE_CONFIG_PATH" in problem.message


def _schema_patterns(node, path=()):
    """(field path, pattern) of every ``pattern`` in the spec's JSON Schema."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield path, node["pattern"]
        for key, value in node.items():
            yield from _schema_patterns(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _schema_patterns(value, (*path, i))


def test_every_pattern_the_spec_enforces_is_described_in_words():
    """The loader says what a field takes in words; a pattern without words would print
    its regular expression. model.id's schema pattern is checked by its own validator."""
    from lmikit.spec._model import HF_ID_PATTERN, PATTERN_WORDS
    from lmikit.spec._schema import spec_json_schema

    found = {pattern for path, pattern in _schema_patterns(spec_json_schema())
             if HF_ID_PATTERN not in pattern}
    assert found and found <= set(PATTERN_WORDS), found - set(PATTERN_WORDS)


# (field, YAML that gives it a value its pattern refuses)
PATTERN_FIELDS = [
    ("name", "name: 'docqa_qwen7b!'"),
    ("region", "region: US East"),
    ("instance.type", "instance: {type: ml.g6e.2xlarg}"),
    ("instance.capacity_reservation_arn",
     "instance: {type: ml.p5.48xlarge, capacity_reservation_arn: 'arn:aws:iam::1:role/plan'}"),
    ("model.revision", "model: {id: Qwen/Qwen2.5-7B-Instruct, revision: 'main branch'}"),
    ("engine.lmi_version", "engine: {lmi_version: '0.38'}"),
    ("kv_cache.disk_path", "kv_cache: {disk_path: /tmp/x}"),
    ("kv_cache.remote_url", "kv_cache: {remote_url: 'http://cache:6379'}"),
    ("kv_cache.remote_credentials_secret_arn",
     "kv_cache: {remote_url: 'redis://c:6379', remote_credentials_secret_arn: secret}"),
    ("adapters.0.name", "adapters: [{name: my_adapter, source: x}]"),
    ("observability.metrics_path", "observability: {metrics_path: metrics}"),
    ("observability.alarms.sns_topic_arn", "observability: {alarms: {sns_topic_arn: topic}}"),
    ("security.kms_key_arn", "security: {kms_key_arn: my-key}"),
    ("security.hf_token_secret_arn", "security: {hf_token_secret_arn: token}"),
    ("security.vpc.subnet_ids.0",
     "security: {vpc: {subnet_ids: [subnet-1], security_group_ids: [sg-0123456789abcdef0]}}"),
    ("security.vpc.security_group_ids.0",
     "security: {vpc: {subnet_ids: [subnet-0123456789abcdef0], security_group_ids: [sg-zz]}}"),
]


def _base_with(yaml_line: str) -> str:
    """BASE with the top-level field ``yaml_line`` sets replaced by it."""
    data = yaml.safe_load(BASE) | yaml.safe_load(yaml_line)
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize(("field", "yaml_line"), PATTERN_FIELDS, ids=[f for f, _ in PATTERN_FIELDS])
def test_a_value_its_pattern_refuses_is_answered_in_words(field, yaml_line):
    problems = {p.path: p.message for p in _errors(_base_with(yaml_line)).problems}
    assert field in problems, problems
    message = problems[field]
    assert message.startswith("must be "), message
    assert not re.search(r"[\^$\\]|\[[^\]]*-[^\]]*\]", message), message  # no regex


@pytest.mark.parametrize(("yaml_line", "meant"), [
    ("name: 'docqa_qwen7b!'", "did you mean 'docqa-qwen7b'?"),
    ("instance: {type: ml.g6e.2xlarg}", "did you mean 'ml.g6e.2xlarge'?"),
    ("instance: {type: g6e.2xlarge}", "did you mean 'ml.g6e.2xlarge'?"),
    ("region: US-EAST-1", "did you mean 'us-east-1'?"),
    ("adapters: [{name: my_adapter, source: x}]", "did you mean 'my-adapter'?"),
    ("kv_cache: {disk_path: /mnt/nvme}", "did you mean '/mnt/nvme/'?"),
])
def test_a_pattern_error_suggests_the_value_meant(yaml_line, meant):
    assert meant in str(_errors(_base_with(yaml_line)))


def test_the_instance_type_misspelt_names_the_catalogs_type():
    err = _errors(BASE.replace("ml.g6e.2xlarge", "ml.g6e.2xlarg"))
    assert str(err) == (
        "1 problem(s) in s.yaml\n  - instance.type (s.yaml:7): must be a SageMaker instance "
        "type such as ml.g6e.2xlarge; did you mean 'ml.g6e.2xlarge'? [got 'ml.g6e.2xlarg']")


def test_an_unknown_region_is_named_unknown_with_the_closest_ones():
    import botocore

    err = _errors(BASE.replace("us-east-1", "us-east-9"))
    (problem,) = err.problems
    assert (problem.path, problem.line, problem.value) == ("region", 3, "us-east-9")
    assert problem.message == (
        f"is not an AWS region botocore {botocore.__version__} knows; did you mean 'us-east-1' "
        "or 'us-east-2'? (a region launched after this botocore needs a newer boto3)")


def test_the_regions_are_those_of_botocores_loader():
    """lmikit reads botocore's partitions.json itself (importing botocore.loaders costs a
    tenth of a second); it must be the data botocore's own loader gives."""
    from botocore.loaders import create_loader

    from lmikit.catalog._regions import aws_regions

    data = create_loader().load_data("partitions")
    regions = {r for p in data["partitions"] for r in p["regions"]}
    assert set(aws_regions()) == {r for r in regions if not r.endswith("-global")}
    assert {"us-east-1", "eu-west-1", "us-gov-west-1", "cn-north-1"} <= set(aws_regions())


def test_a_spec_error_lists_the_first_twenty_problems_then_how_many_more():
    """Every problem is kept (``problems``); the message shows the first 20, then a count."""
    from lmikit.errors import MAX_LISTED_PROBLEMS

    assert MAX_LISTED_PROBLEMS == 20
    adapters = "".join(f"  - {{name: bad_{i}, source: x}}\n" for i in range(30))
    err = _errors(BASE + "adapters:\n" + adapters)
    assert len(err.problems) == 30
    lines = str(err).splitlines()
    assert lines[0] == "30 problem(s) in s.yaml"
    assert [line.split(" (")[0] for line in lines[1:21]] == [
        f"  - adapters.{i}.name" for i in range(20)]
    assert lines[21:] == ["  ... and 10 more"]
