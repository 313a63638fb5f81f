"""``lmikit doctor`` reads the deployment as it is: the settings of a component whose weights
SageMaker copies from S3 from the Model it names, a deployed image it was not told, a
resource SageMaker is still changing, without waiting for it, and an AWS call that fails as
:class:`~lmikit.errors.AwsError` (doctor could not check), never as a failed check."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from lmikit.client._endpoint import Endpoint
from lmikit.deploy._doctor import Doctor, Report, doctor
from lmikit.errors import AwsError
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, VirtualClock
from tests.conftest import deadline

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


def _scaling_out(fake: FakeSageMaker, session: Any, clock: VirtualClock,
                 tmp_path: Path) -> DeploymentSpec:
    """A deployed spec whose base component then stays Updating (a copy-count change, as
    autoscaling makes, that the fake's clock never lets finish)."""
    spec = load_spec_text(SPEC_YAML)
    deployment(spec, session, clock, tmp_path).deploy()
    fake.inject("UpdateInferenceComponentRuntimeConfig", "slow", seconds=3600)
    session.client("sagemaker").update_inference_component_runtime_config(
        InferenceComponentName="docqa-base", DesiredRuntimeConfig={"CopyCount": 2})
    assert _base(session)["InferenceComponentStatus"] == "Updating"
    return spec


def test_doctor_reports_an_updating_component_without_waiting(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """The dry run waits for settled resources (up to an hour, polling every 15 s); doctor
    must answer at once, and an update in progress is not a failure: SageMaker keeps
    serving while it applies one."""
    spec = _scaling_out(fake, session, clock, tmp_path)
    assert Endpoint("docqa", session=session, clock=clock).invoke("still").text
    with deadline(30):
        report = _doctor(spec, session, clock, tmp_path)
    components, drift = report.check("components"), report.check("drift")
    assert (components.verdict, drift.verdict) == ("wait", "wait"), report.to_dict()
    assert components.detail.startswith("component docqa-base is Updating")
    assert drift.detail == "not compared while component docqa-base is Updating"
    assert "again once" in components.fix and "again once" in drift.fix
    assert report.healthy and not report.settled
    assert report.to_dict()["settled"] is False


def test_doctor_drift_does_not_wait_for_a_change_that_began_after_health(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """A resource that starts changing between the status checks and the dry run is still
    not waited for: the dry run runs with wait=False."""
    spec = _scaling_out(fake, session, clock, tmp_path)
    d = Doctor(spec, session=session, base_dir=tmp_path)
    endpoint = session.client("sagemaker").describe_endpoint(EndpointName="docqa")
    with deadline(30):
        drift = d.drift(endpoint)[0]  # health() did not run: nothing known to be changing
    assert drift.verdict == "wait"
    assert drift.detail == ("not compared: not waiting for inference-component docqa-base to "
                            "finish Updating")


def test_doctor_endpoint_in_transition_waits_and_failed_fails(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = load_spec_text(SPEC_YAML)
    deployment(spec, session, clock, tmp_path).deploy()
    endpoint = session.client("sagemaker").describe_endpoint(EndpointName="docqa")
    for status, verdict in (("SystemUpdating", "wait"), ("Creating", "wait"),
                            ("Failed", "fail")):
        d = Doctor(spec, session=session, base_dir=tmp_path)
        check = d.health({**endpoint, "EndpointStatus": status})[0]
        assert (check.name, check.verdict) == ("endpoint", verdict), check.line()
    assert d.changing == []  # a Failed endpoint is not a change in progress


def test_doctor_that_may_not_read_the_artifact_raises_aws_error(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """AccessDenied on the model artifact says nothing about the artifact: doctor could not
    look, which the CLI reports as exit 3, not as a failed serving.properties check."""
    spec = load_spec_text(SPEC_YAML)
    deployment(spec, session, clock, tmp_path).deploy()
    fake.inject("GetObject", "denied")
    with pytest.raises(AwsError, match="GetObject failed: AccessDenied"):
        _doctor(spec, session, clock, tmp_path)
