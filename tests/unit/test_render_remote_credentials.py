"""Where ``kv_cache.remote_credentials_secret_arn`` goes in each target: the ARN to lmikit's
image, a refusal for the stock image and for the HyperPod operator (whose CRD has no place
for a secret reference), never a credential."""

from __future__ import annotations

import pytest

from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._env import KV_REMOTE_CREDENTIALS_ENV, container_environment, lmi_environment
from lmikit.render._hyperpod import hyperpod_manifest
from lmikit.render._lmcache import render_lmcache_yaml
from lmikit.render._sagemaker import render_requests
from lmikit.spec._loader import load_spec_text
from tests.conftest import hyperpod_crd_v1
from tests.unit.test_render_hyperpod import IMAGE
from tests.unit.test_spec import BASE

KV_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:kv-redis-AbCdEf"
REMOTE = (BASE + "kv_cache:\n  mode: remote\n  remote_url: rediss://cache.internal:6380/0\n"
          f"  remote_credentials_secret_arn: {KV_ARN}\n")
ROLE = "arn:aws:iam::111122223333:role/lmikit-exec"


def _spec(text: str = REMOTE):
    spec = load_spec_text(text)
    return spec, plan_spec(spec)


def test_lmikit_image_env_carries_the_arn_and_a_credential_free_url() -> None:
    spec, plan = _spec()
    env = container_environment(spec, plan, image="lmikit")
    assert env[KV_REMOTE_CREDENTIALS_ENV] == KV_ARN
    assert '"remote_url":"rediss://cache.internal:6380/0"' in env["LMIKIT_PLAN"]
    assert "rediss://cache.internal:6380/0" in render_lmcache_yaml(plan)


def test_arn_is_rendered_only_when_the_plan_uses_the_remote_tier() -> None:
    spec, plan = _spec(REMOTE.replace("mode: remote", "mode: auto"))
    assert plan.tier != "remote"  # the default workload fits the CPU tier
    assert KV_REMOTE_CREDENTIALS_ENV not in lmi_environment(spec, plan, image="lmikit")


def test_stock_image_is_refused_with_the_way_out() -> None:
    spec, plan = _spec()
    with pytest.raises(RenderError, match="kv_cache.remote_credentials_secret_arn: the stock "
                       "LMI image cannot read a Secrets Manager secret.*lmikit's image"):
        render_requests(spec, plan, image_uri="img:1", execution_role_arn=ROLE,
                        model_artifact_url="s3://b/k.tar.gz")
    ok = render_requests(spec, plan, image_uri="img:1", execution_role_arn=ROLE,
                         model_artifact_url="s3://b/k.tar.gz", image_kind="lmikit")
    env = ok.base_component["Specification"]["Container"]["Environment"]
    assert env[KV_REMOTE_CREDENTIALS_ENV] == KV_ARN


def test_both_secrets_on_the_stock_image_are_reported_together() -> None:
    hf = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf"
    spec, plan = _spec(REMOTE + f"security:\n  hf_token_secret_arn: {hf}\n")
    with pytest.raises(RenderError, match="hf_token_secret_arn.*; kv_cache.remote_credentials"):
        render_requests(spec, plan, image_uri="img:1", execution_role_arn=ROLE,
                        model_artifact_url="s3://b/k.tar.gz")


def test_hyperpod_crd_has_no_secret_reference_for_the_l2_cache() -> None:
    """The refusal below rests on this: l2CacheSpec takes a backend and a URL, nothing else."""
    kv = hyperpod_crd_v1()["properties"]["spec"]["properties"]["kvCacheSpec"]
    assert set(kv["properties"]["l2CacheSpec"]["properties"]) == {"l2CacheBackend",
                                                                   "l2CacheLocalUrl"}
    assert not [k for k in kv["properties"] if "secret" in k.lower()]


def test_hyperpod_refuses_a_redis_l2_with_credentials() -> None:
    spec, plan = _spec()
    with pytest.raises(RenderError) as info:
        hyperpod_manifest(spec, plan, image_uri=IMAGE)
    text = str(info.value)
    assert "kv_cache.remote_credentials_secret_arn" in text
    assert "l2CacheLocalUrl" in text and "no Kubernetes Secret reference" in text


def test_hyperpod_without_credentials_still_renders_the_redis_l2() -> None:
    spec, plan = _spec(REMOTE.replace(f"  remote_credentials_secret_arn: {KV_ARN}\n", ""))
    l2 = hyperpod_manifest(spec, plan, image_uri=IMAGE)["spec"]["kvCacheSpec"]["l2CacheSpec"]
    assert l2 == {"l2CacheBackend": "redis", "l2CacheLocalUrl": "rediss://cache.internal:6380/0"}
