"""Specs generated from lmikit's own JSON Schema (``lmikit schema``): whatever the loader accepts,
lmikit.accept either renders every target, each passing a validator none of us wrote, or refuses
with one of lmikit's errors; a render refusal leaves the other targets rendering and valid.

Validators: botocore's SageMaker and CloudWatch models (lmikit.testing.ShapeValidator), LMCache's
own config loader, the HyperPod CRD. cfn-lint is left to the CDK tests (too slow per example).
Bounded by the hypothesis profile (a fifth of its examples: 40 under "ci").
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import botocore.session
import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from lmikit.accept._accept import TARGETS, accept_spec
from lmikit.catalog._instances import INSTANCES
from lmikit.catalog._models import catalog_ids
from lmikit.errors import AdapterError, CatalogError, PlanError, RenderError, SpecError
from lmikit.render._sagemaker import render_requests
from lmikit.spec._loader import load_spec_text
from lmikit.spec._schema import spec_json_schema
from lmikit.testing import ShapeValidator
from tests.conftest import hyperpod_crd_v1
from tests.unit.schema_strategy import from_schema

lmcache_config = pytest.importorskip("lmcache.v1.config")

ROLE = "arn:aws:iam::111122223333:role/lmikit-exec"
ARTIFACT = "s3://lmikit-artifacts-111122223333/spec/model/abc.tar.gz"
SESSION = botocore.session.get_session()
SAGEMAKER = SESSION.get_service_model("sagemaker")
CLOUDWATCH = SESSION.get_service_model("cloudwatch")
REFUSALS = (CatalogError, PlanError, RenderError, AdapterError)

SPECS = from_schema(spec_json_schema(), {
    ("model", "id"): st.sampled_from(catalog_ids()),
    ("model", "config_path"): st.none(),
    ("instance", "type"): st.sampled_from(sorted(INSTANCES)),
    ("region",): st.sampled_from(["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"]),
    ("engine", "lmi_version"): st.just("0.38.0"),
    ("adapters",): st.one_of(st.just([]), st.lists(st.fixed_dictionaries({
        "name": st.sampled_from(["legal", "tax"]),
        "source": st.just("s3://bucket/adapters/a.tar.gz")}), max_size=1)),
    ("formatters",): st.just({}),
})




@functools.cache
def _crd() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(hyperpod_crd_v1())


def _shape(model: object, operation: str, request: dict) -> list[str]:
    return ShapeValidator().validate(model.operation_model(operation).input_shape,  # type: ignore[attr-defined]
                                     request)


def _check_output(target: str, text: str, accepted: object, folder: Path) -> None:
    if target == "lmcache":
        path = folder / "lmcache.yaml"
        path.write_text(text)
        lmcache_config.LMCacheEngineConfig.from_file(str(path))
    elif target == "env":
        env = json.loads(text)
        assert all(isinstance(v, str) for v in env.values()), env
    elif target == "sagemaker":
        spec, plan = accepted.spec, accepted.plan  # type: ignore[attr-defined]
        r = render_requests(spec, plan, image_uri=accepted.image_uri or "img:1",  # type: ignore[attr-defined]
                            execution_role_arn=ROLE, model_artifact_url=ARTIFACT,
                            adapter_artifact_urls={a.name: a.source for a in spec.adapters})
        errors = _shape(SAGEMAKER, "CreateEndpointConfig", r.endpoint_config)
        errors += _shape(SAGEMAKER, "CreateEndpoint", r.endpoint)
        errors += _shape(SAGEMAKER, "CreateInferenceComponent", r.base_component)
        for req in r.adapter_components.values():
            errors += _shape(SAGEMAKER, "CreateInferenceComponent", req)
        assert errors == [], errors
    elif target == "hyperpod":
        manifest = yaml.safe_load(text)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in _crd().iter_errors(manifest)]
        assert errors == [], errors
    elif target == "cloudwatch":
        data = json.loads(text)
        body = data["DashboardBody"]
        errors = _shape(CLOUDWATCH, "PutDashboard", {
            "DashboardName": data["DashboardName"],
            "DashboardBody": body if isinstance(body, str) else json.dumps(body)})
        for alarm in data["Alarms"]:
            errors += _shape(CLOUDWATCH, "PutMetricAlarm", alarm)
        assert errors == [], errors
    elif target == "grafana":
        assert json.loads(text)["panels"]
    elif target == "serving-properties":
        assert all("=" in line for line in text.splitlines() if line and line[0] != "#")


@settings(max_examples=max(10, settings.default.max_examples // 5), deadline=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(SPECS)
def test_schema_generated_specs_render_or_are_refused_clearly(doc):
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        load_spec_text(text, "generated.yaml")
    except SpecError:
        event("refused by the loader")
        return
    with tempfile.TemporaryDirectory(prefix="lmikit-prop-") as tmp:
        folder = Path(tmp)
        path = folder / "spec.yaml"
        path.write_text(text)
        try:
            accepted = accept_spec(path)
        except REFUSALS as exc:
            event(f"refused: {type(exc).__name__}")
            assert str(exc)
            if not isinstance(exc, RenderError):
                return
            named = {t for line in str(exc).splitlines() if line.startswith("  - ")
                     for t in line[4:].split(": ", 1)[0].split(", ")}
            assert named and named <= set(TARGETS), str(exc)
            rest = [t for t in TARGETS if t not in named]
            accepted = accept_spec(path, rest) if rest else None
            if accepted is None:
                return
        event("rendered")
        for target, out in accepted.rendered.items():
            _check_output(target, out, accepted, folder)
