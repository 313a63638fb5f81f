"""No credentials in any spec value: refused with the field named, the value masked, and the
secret-based alternative (``kv_cache.remote_credentials_secret_arn``) checked."""

from __future__ import annotations

import copy
import types
import typing
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel, ValidationError

from lmikit.cli import main
from lmikit.errors import SpecError
from lmikit.spec import DeploymentSpec
from lmikit.spec._credentials import mask_credentials, url_credentials
from lmikit.spec._loader import load_spec_text, validate_data
from lmikit.spec._schema import validate_file
from tests.unit.test_render_env import ISOLATED
from tests.unit.test_spec import BASE

SENTINEL = "S3ntinelPw"
KV_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:kv-redis-AbCdEf"


def _string_paths(model: type[BaseModel], prefix: tuple[Any, ...] = ()
                  ) -> list[tuple[Any, ...]]:
    """Every place a string can go in the spec, from the model itself (new fields included):
    string fields, string list items (index 0) and mapping values (key "k")."""
    out: list[tuple[Any, ...]] = []
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        annotation = field.annotation
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        args = [a for a in typing.get_args(annotation) if a is not type(None)] if union else [
            annotation]
        for arg in args:
            origin, inner = typing.get_origin(arg), typing.get_args(arg)
            base = typing.get_args(inner[0])[0] if inner and typing.get_origin(
                inner[0]) is typing.Annotated else (inner[0] if inner else None)
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out += _string_paths(arg, path)
            elif origin is list and isinstance(base, type) and issubclass(base, BaseModel):
                out += _string_paths(base, (*path, 0))
            elif origin is list:
                out.append((*path, 0))
            elif origin is dict:
                out.append((*path, "k"))
            elif arg is str or typing.get_origin(arg) is typing.Literal or (
                    typing.get_origin(arg) is typing.Annotated):
                out.append(path)
    return sorted(set(out), key=str)


STRING_PATHS = _string_paths(DeploymentSpec)


def _set(data: dict[str, Any], path: tuple[Any, ...], value: str) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node: Any = data
    for part, nxt in zip(path, path[1:], strict=False):
        if isinstance(part, int):
            while len(node) <= part:
                node.append({})
            node = node[part]
        else:
            node = node.setdefault(part, [] if isinstance(nxt, int) else {})
    last = path[-1]
    if isinstance(last, int):
        node.append(value)
    else:
        node[last] = value
    return data


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        validate_data(data, source="s.yaml")
    return str(info.value)


def test_string_paths_cover_the_url_fields() -> None:
    dotted = {".".join(map(str, p)) for p in STRING_PATHS}
    assert {"model.id", "engine.speculative.draft_model", "adapters.0.source",
            "kv_cache.remote_url", "formatters.input", "model.config_path", "tags.k",
            "kv_cache.remote_credentials_secret_arn"} <= dotted
    assert len(dotted) >= 27


@pytest.mark.parametrize("path", STRING_PATHS, ids=lambda p: ".".join(map(str, p)))
def test_every_string_field_refuses_a_url_with_credentials_masked(path) -> None:
    data = _set(yaml.safe_load(BASE), path, f"s3://AKIAEXAMPLE:{SENTINEL}@bucket/x")
    text = _refusal(data)
    dotted = ".".join(map(str, path))
    assert f"{dotted} (s.yaml" in text or f"{dotted}:" in text
    assert "carries credentials" in text and "****@bucket/x" in text
    assert SENTINEL not in text and "AKIAEXAMPLE" not in text


@pytest.mark.parametrize("url", [
    f"redis://:{SENTINEL}@cache:6379",
    f"rediss://app:{SENTINEL}@cache.internal:6380/0",
    f"redis://app@cache:6379/0?password={SENTINEL}",
    f"redis://cache:6379/0?db=1&Auth-Token={SENTINEL}",
    f"redis://cache:6379?PASSWD={SENTINEL}#x",
])
def test_remote_url_credentials_point_to_the_secret_field(url) -> None:
    text = _refusal(yaml.safe_load(BASE) | {"kv_cache": {"mode": "remote", "remote_url": url}})
    assert "kv_cache.remote_url" in text
    assert "kv_cache.remote_credentials_secret_arn" in text and "Secrets Manager" in text
    assert SENTINEL not in text and "****" in text


@pytest.mark.parametrize(("path", "url"), [
    (("model", "id"), f"s3://bucket/weights/?X-Amz-Signature={SENTINEL}"),
    (("engine", "speculative", "draft_model"), f"s3://k:{SENTINEL}@bucket/draft/"),
    (("adapters", 0, "source"), f"s3://k:{SENTINEL}@bucket/a.tar.gz"),
])
def test_s3_fields_point_to_the_execution_role(path, url) -> None:
    text = _refusal(_set(yaml.safe_load(BASE), path, url))
    assert "execution role" in text and SENTINEL not in text


def test_direct_validation_error_does_not_repeat_the_input() -> None:
    data = yaml.safe_load(BASE) | {"kv_cache": {"remote_url": f"redis://:{SENTINEL}@h:1"}}
    with pytest.raises(ValidationError) as info:
        DeploymentSpec.model_validate(data)
    assert "kv_cache.remote_url" in str(info.value) and SENTINEL not in str(info.value)


def test_schema_view_and_cli_mask_the_value(tmp_path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(BASE + f"kv_cache:\n  mode: remote\n  remote_url: 'redis://:{SENTINEL}"
                    "@cache:6379'\n  bogus: 1\ntags:\n  t: 'x'\n")
    with pytest.raises(SpecError) as info:
        validate_file(spec)
    assert "kv_cache.remote_url" in str(info.value) and SENTINEL not in str(info.value)
    for command in (["validate", str(spec)], ["render", str(spec), "--target", "env"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code != 0, result.output
        assert "SpecError" in result.output and "kv_cache.remote_url" in result.output
        assert SENTINEL not in result.output


@pytest.mark.parametrize("value", [
    "s3://bucket/models/llama@v2/", "Qwen/Qwen2.5-7B-Instruct", "redis://cache:6379/0?db=2",
    "mooncakestore://m:50051", "see docs at https://example.com/a?page=2",
])
def test_urls_without_credentials_are_not_flagged(value) -> None:
    assert url_credentials(value) is None and mask_credentials(value) == value


# --- kv_cache.remote_credentials_secret_arn --------------------------------------------------

REMOTE = "kv_cache:\n  mode: remote\n  remote_url: {url}\n  remote_credentials_secret_arn: {arn}\n"


def _remote(url: str = "rediss://cache:6380", arn: str = KV_ARN) -> str:
    return BASE + REMOTE.format(url=url, arn=arn)


@pytest.mark.parametrize("arn", [
    KV_ARN, "arn:aws-cn:secretsmanager:cn-north-1:111122223333:secret:kv-AbCdEf",
    "arn:aws-us-gov:secretsmanager:us-gov-west-1:111122223333:secret:kv-AbCdEf",
])
def test_remote_credentials_secret_accepts_every_partition(arn) -> None:
    spec = load_spec_text(_remote(arn=arn))
    assert spec.kv_cache.remote_credentials_secret_arn == arn


@pytest.mark.parametrize("arn", ["hunter2", "arn:aws:kms:us-east-1:111122223333:key/k",
                                 "arn:aws:secretsmanager:us-east-1:1234:secret:x"])
def test_remote_credentials_secret_must_be_a_secret_arn(arn) -> None:
    with pytest.raises(SpecError, match="kv_cache.remote_credentials_secret_arn"):
        load_spec_text(_remote(arn=arn))


def test_remote_credentials_secret_needs_a_remote_url() -> None:
    text = BASE + f"kv_cache:\n  remote_credentials_secret_arn: {KV_ARN}\n"
    with pytest.raises(SpecError, match="kv_cache.remote_url, which is not set"):
        load_spec_text(text)


@pytest.mark.parametrize(("url", "why"), [
    ("s3://kv-bucket.s3.us-east-1.amazonaws.com", "execution role"),
    ("lm://cache:65432", "host and port"),
    ("infinistore://cache:12345", "host, port and device"),
])
def test_remote_credentials_secret_only_for_redis(url, why) -> None:
    with pytest.raises(SpecError, match=f"takes no credentials.*{why}"):
        load_spec_text(_remote(url=url))


def test_remote_credentials_secret_refused_with_network_isolation() -> None:
    text = ISOLATED + REMOTE.format(url="redis://cache:6379", arn=KV_ARN)
    with pytest.raises(SpecError) as info:
        load_spec_text(text)
    assert "kv_cache.remote_credentials_secret_arn" in str(info.value)
    assert "no Secrets Manager" in str(info.value)
