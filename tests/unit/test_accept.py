"""One acceptance path: `validate`, `render`, `plan` and `deploy` accept and refuse alike."""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml
from click.testing import CliRunner

from lmikit.accept._accept import DEPLOY_TARGETS, TARGETS, accept_spec
from lmikit.cli import main
from lmikit.errors import RenderError, SpecError
from tests.conftest import DEFAULT_SPEC, EXAMPLE_SPECS, deadline

BASE = yaml.safe_load(DEFAULT_SPEC.read_text())


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _spec(tmp_path, **changes):
    doc = json.loads(json.dumps(BASE))
    for dotted, value in changes.items():
        node = doc
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_accept_spec_examples_render_every_target(path):
    accepted = accept_spec(path)
    assert set(accepted.rendered) == set(TARGETS)
    assert accepted.image_uri and accepted.image_uri.startswith("763104351884.dkr.ecr.")


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_accept_render_cli_prints_what_acceptance_rendered(path):
    accepted = accept_spec(path)
    for target in TARGETS:
        result = _cli("render", str(path), "-t", target)
        assert result.exit_code == 0, result.output
        assert result.stdout == accepted.output(target)
        alone = accept_spec(path, (target,))
        assert result.stderr == "".join(f"Warning: {w}\n" for w in alone.warnings)


def _remote_lm(tmp_path):
    """A spec SageMaker serves (LMCache's lm:// remote) that HyperPod's operator cannot."""
    return _spec(tmp_path, kv_cache__mode="remote", kv_cache__remote_url="lm://cache:65432")


def test_accept_target_only_one_renderer_refuses_is_named_once(tmp_path):
    path = _remote_lm(tmp_path)
    with pytest.raises(RenderError) as info:
        accept_spec(path)
    message = str(info.value)
    assert message.count("hyperpod: kv_cache.remote_url 'lm://cache:65432'") == 1
    assert message.endswith("(lmcache, env, serving-properties, sagemaker, cloudwatch, "
                            "grafana render it; use --target to check only the targets you "
                            "use)")
    assert set(accept_spec(path, DEPLOY_TARGETS).rendered) == set(DEPLOY_TARGETS)


def test_accept_validate_and_render_agree_per_target(tmp_path):
    path = str(_remote_lm(tmp_path))
    for target in TARGETS:
        rendered = _cli("render", path, "-t", target)
        validated = _cli("validate", path, "-t", target)
        assert rendered.exit_code == validated.exit_code == (2 if target == "hyperpod" else 0)
    everything = _cli("validate", path)
    assert everything.exit_code == 2
    assert everything.output.startswith("RenderError: 1 problem(s) rendering ")


def test_accept_validate_refuses_what_only_render_refused_before(tmp_path):
    """kms_volume_encryption 'required' on an instance with local NVMe: SageMaker rejects
    KmsKeyId there, which the SageMaker renderer knows and the spec model does not."""
    path = str(_spec(tmp_path, security={
        "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/abcd",
        "kms_volume_encryption": "required"}))
    render = _cli("render", path, "-t", "sagemaker")
    validate = _cli("validate", path)
    assert render.exit_code == validate.exit_code == 2
    assert "security.kms_volume_encryption is 'required'" in render.output
    assert "sagemaker: security.kms_volume_encryption is 'required'" in validate.output
    assert _cli("plan", path).exit_code == 2


def test_accept_validate_refuses_an_lmi_version_without_an_image(tmp_path):
    path = str(_spec(tmp_path, engine__lmi_version="9.0.0"))  # newer than any image known
    validate = _cli("validate", path)
    assert validate.exit_code == 2
    assert validate.output.count("no LMI image for engine.lmi_version '9.0.0'") == 1
    assert "sagemaker, hyperpod: no LMI image" in validate.output
    assert "(lmcache, env, serving-properties, cloudwatch, grafana render it;" in validate.output
    hyperpod = _cli("render", path, "-t", "hyperpod")
    assert hyperpod.exit_code == 2 and "render it" not in hyperpod.output
    assert _cli("render", path, "-t", "lmcache").exit_code == 0


def test_accept_validate_prints_each_problem_once(tmp_path):
    """The schema and the model used to report the same mistake twice, in two wordings."""
    path = str(_spec(tmp_path, name="bad name", instance__max_count="2"))
    result = _cli("validate", path)
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == f"SpecError: 2 problem(s) in {path}"
    assert sorted(line.split(" (")[0] for line in lines[1:]) == [
        "  - instance.max_count", "  - name"]
    assert _cli("render", path, "-t", "env").output == result.output


def test_accept_validate_and_render_both_refuse_a_string_number(tmp_path):
    path = str(_spec(tmp_path, instance__max_count="2"))
    for args in (("validate", path), ("render", path, "-t", "env"), ("plan", path)):
        result = _cli(*args)
        assert result.exit_code == 2
        assert "instance.max_count" in result.output and "input should be a valid integer" \
            in result.output


def test_accept_cli_fifo_spec_is_a_spec_error_without_waiting(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    for command in (("validate",), ("render", "-t", "env"), ("plan",)):
        with deadline(5):
            result = _cli(command[0], str(fifo), *command[1:])
        assert result.exit_code == 2
        assert result.output.startswith("SpecError: 1 problem(s)")
        assert "is not a regular file (it is a FIFO" in result.output


def test_accept_cli_bad_config_json_is_a_catalog_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": True}))
    path = str(_spec(tmp_path, model={"id": "acme/model", "config_path": "config.json"}))
    for args in (("validate", path), ("render", path, "-t", "env"), ("plan", path)):
        result = _cli(*args)
        assert result.exit_code == 2
        assert result.output.startswith("CatalogError: model config '")
        assert "num_hidden_layers must be a whole number from 1 to 1,024 [got True]" \
            in result.output


def test_accept_plan_target_option_limits_the_check(tmp_path):
    """plan judges the SageMaker deployment unless --target names others."""
    path = str(_remote_lm(tmp_path))
    assert _cli("plan", path, "-t", "hyperpod").exit_code == 2
    for extra in ((), ("-t", "sagemaker")):
        result = _cli("plan", path, "--json", *extra)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["tier"] == "remote"


def test_accept_resolves_the_image_without_the_sagemaker_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "sagemaker", None)  # importing it now fails
    accepted = accept_spec(DEFAULT_SPEC)
    assert accepted.image_uri is not None and "djl-inference:0.38.0-lmi" in accepted.image_uri
    assert accepted.notes == ()
    render = CliRunner().invoke(main, ["render", str(DEFAULT_SPEC), "-t", "sagemaker"])
    assert render.exit_code == 0, render.output
    assert accepted.image_uri in render.output


def test_accept_spec_error_comes_before_any_render(tmp_path):
    path = _spec(tmp_path, kv_cache__mode="disk")
    with pytest.raises(SpecError, match="kv_cache.mode"):
        accept_spec(path)


def test_accept_unknown_target_is_a_value_error():
    with pytest.raises(ValueError, match="unknown target"):
        accept_spec(DEFAULT_SPEC, ("pdf",))


def test_accept_deploy_refuses_before_any_aws_call(tmp_path):
    path = str(_spec(tmp_path, security={
        "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/abcd",
        "kms_volume_encryption": "required"}))
    result = _cli("deploy", path, "--role-arn", "arn:aws:iam::123456789012:role/r",
                  "--bucket", "b")
    assert result.exit_code == 2
    assert result.output.startswith("RenderError: 1 problem(s) rendering ")
    assert "sagemaker: security.kms_volume_encryption is 'required'" in result.output


def test_accept_deploy_checks_only_what_it_deploys(tmp_path):
    """HyperPod's refusal of an lm:// remote does not stop a SageMaker deployment."""
    accepted = accept_spec(_remote_lm(tmp_path), DEPLOY_TARGETS)
    assert "hyperpod" not in accepted.rendered and accepted.plan.tier == "remote"
