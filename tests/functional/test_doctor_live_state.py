"""``lmikit doctor`` reads the deployment as it is: the settings of a component whose weights
SageMaker copies from S3 from the Model it names, and a deployed image it was not told."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from lmikit.doctor import Report, doctor
from lmikit.endpoint import Endpoint
from lmikit.loader import load_spec_text
from lmikit.spec import DeploymentSpec
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import IMAGE, SPEC_YAML, deployment
from .test_deploy_s3_weights import ISOLATED

STICKY = "routing:\n  strategy: sticky_session\n"


def _doctor(spec: DeploymentSpec, session: Any, clock: VirtualClock, tmp_path: Path,
            **kwargs: Any) -> Report:
    now = dt.datetime.fromtimestamp(clock.time(), tz=dt.timezone.utc)
    return doctor(spec, session=session, base_dir=tmp_path, now=now, **kwargs)


def _base(session: Any) -> dict[str, Any]:
    return dict(session.client("sagemaker").describe_inference_component(
        InferenceComponentName="docqa-base"))


def test_doctor_reads_sessions_from_the_model_of_an_s3_weights_component(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """With S3 weights the component names a Model (DescribeInferenceComponent's
    Specification.ModelName, no Container) and the OPTION_* settings are the Model's
    PrimaryContainer.Environment."""
    spec = load_spec_text(ISOLATED + STICKY)
    deployment(spec, session, clock, tmp_path).deploy()
    assert "Container" not in _base(session)["Specification"]
    with Endpoint("docqa", session=session, clock=clock).session() as s:
        assert s.id
    report = _doctor(spec, session, clock, tmp_path)
    assert report.check("sessions").verdict == "ok", report.check("sessions").line()


def test_doctor_takes_the_image_of_an_s3_weights_component_from_its_model(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """The Model's PrimaryContainer.Image is what the component runs; doctor renders with it
    (the --image-uri default), so an untouched deployment shows no drift."""
    spec = load_spec_text(ISOLATED)
    deployment(spec, session, clock, tmp_path).deploy()  # deployed with conftest's IMAGE
    model = session.client("sagemaker").describe_model(
        ModelName=_base(session)["Specification"]["ModelName"])
    assert model["PrimaryContainer"]["Image"] == IMAGE
    drift = _doctor(spec, session, clock, tmp_path).check("drift")
    assert drift.verdict == "ok", drift.line()


def test_doctor_sessions_count_a_missing_option_as_on_and_fail_on_another_value(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """LMI's async service enables sessions unless enable_stateful_sessions is set to
    something other than "true" (djl-serving vllm_async_service.py VLLMHandler.initialize)."""
    spec = load_spec_text(SPEC_YAML)
    deployment(spec, session, clock, tmp_path).deploy()
    sm = session.client("sagemaker")
    for value, verdict in ((None, "ok"), ("false", "fail")):
        desc = _base(session)["Specification"]
        container = desc["Container"]
        container["Image"] = container.pop("DeployedImage")["SpecifiedImage"]
        container["Environment"].pop("OPTION_ENABLE_STATEFUL_SESSIONS", None)
        if value is not None:
            container["Environment"]["OPTION_ENABLE_STATEFUL_SESSIONS"] = value
        sm.update_inference_component(InferenceComponentName="docqa-base", Specification=desc)
        fake.settle()
        sessions = _doctor(spec, session, clock, tmp_path).check("sessions")
        assert sessions.verdict == verdict, sessions.line()
    assert "OPTION_ENABLE_STATEFUL_SESSIONS='false'" in sessions.detail
    assert "fails every request" in sessions.detail
