"""Who manages an adapter: the spec (``lmikit deploy``) or ``lmikit adapters``. A deploy
reconciles only the spec's adapters, keeps registered ones (``--prune`` removes them), and
``adopt`` hands a registered adapter to the spec; doctor reports registered ones as info."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import Result

from lmikit.errors import DeployError
from lmikit.lora import AdapterRegistry
from lmikit.names import (
    ADAPTER_TAG,
    MANAGED_BY_ADAPTERS,
    MANAGED_BY_SPEC,
    MANAGED_BY_TAG,
    deployment_tags,
)
from lmikit.planner._planner import plan_spec
from lmikit.render._sagemaker import render_requests
from lmikit.testing import FakeSageMaker, VirtualClock, write_lora_adapter
from lmikit.testing._fake import service_model
from lmikit.testing._validate import ShapeValidator

from .conftest import (
    BUCKET,
    IMAGE,
    REGION,
    ROLE,
    cli_against,
    deployment,
    live,
    make_adapter,
    realtime_fake,
    spec_with,
)

README = Path(__file__).resolve().parents[2] / "README.md"
# The README's sandbox walk-through spec, up to its adapters list.
_WALKTHROUGH = README.read_text().split("cat > spec.yaml <<'YAML'\n", 1)[1].split("\nYAML", 1)[0]
DEMO = _WALKTHROUGH[:_WALKTHROUGH.index("adapters:\n") + len("adapters:\n")]
KEPT_SUPPORT = ("  kept inference-component demo-support (adapter 'support' is registered with "
                "`lmikit adapters`, not in the spec; --prune removes it)")


def _tags(sm: Any, component: str) -> dict[str, str]:
    arn = sm.describe_inference_component(InferenceComponentName=component)[
        "InferenceComponentArn"]
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


# --- the CLI, as the README's walk-through uses it ----------------------------------------

@dataclass
class Demo:
    """The README's ``demo`` deployed by ``lmikit deploy``, with the CLI against the fake."""

    root: Path
    fake: FakeSageMaker
    cli: Any

    @property
    def spec(self) -> str:
        return str(self.root / "spec.yaml")

    def write_spec(self, *adapters: str) -> None:
        """The spec listing ``adapters`` (``name`` or ``name=folder``)."""
        lines = [f"  - {{name: {a.split('=')[0]}, source: adapters/{a.split('=')[-1]}}}\n"
                 for a in adapters]
        (self.root / "spec.yaml").write_text(DEMO + "".join(lines))

    def run(self, *args: str) -> Result:
        return self.cli(*args)

    def deploy(self, *options: str) -> Result:
        result = self.run("deploy", self.spec, *options)
        assert result.exit_code == 0, result.output
        return result

    def register_support(self) -> None:
        result = self.run("adapters", "register", "support", str(self.root / "adapters" /
                                                                  "support"),
                          "--spec", self.spec, "--wait")
        assert result.exit_code == 0, result.output
        assert "support: demo-support InService, registered with lmikit adapters" \
            in result.stdout

    def components(self) -> dict[str, Any]:
        """The components now (deploy and --wait wait until deletions are done)."""
        return self.fake.resources()["inference-component"]

    @property
    def sm(self) -> Any:
        return self.fake.attach(boto3.client("sagemaker", region_name=REGION))


@pytest.fixture
def demo(aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Demo:
    fake = realtime_fake()
    for name in ("legal", "medical", "support"):
        make_adapter(tmp_path / "adapters", name)
    write_lora_adapter(tmp_path / "adapters" / "support-v2", fill=77)  # other weights
    d = Demo(tmp_path, fake, cli_against(fake, monkeypatch))
    d.write_spec("legal")
    d.deploy("--role-arn", ROLE, "--bucket", BUCKET)
    return d


def test_readme_walkthrough_register_then_deploy_keeps_the_registered_adapter(
        demo: Demo) -> None:
    demo.register_support()
    dry = demo.run("deploy", demo.spec, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert KEPT_SUPPORT in dry.output.splitlines()
    assert "  nothing: every resource already matches the spec" in dry.output.splitlines()
    again = demo.deploy()
    assert KEPT_SUPPORT in again.output.splitlines()
    assert demo.components() == {"demo-base": "InService", "demo-legal": "InService",
                                 "demo-support": "InService"}
    listed = demo.run("adapters", "list", "--spec", demo.spec).stdout.splitlines()
    assert [line.split(",")[1].split(" (")[0] for line in listed] == [
        " managed by the spec", " registered with lmikit adapters"]


def test_doctor_reports_a_registered_adapter_as_information_not_drift(demo: Demo) -> None:
    demo.register_support()
    result = demo.run("doctor", demo.spec, "--json")
    assert result.exit_code == 0, result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["drift"]["verdict"] == "ok", checks["drift"]
    assert checks["adapters"]["verdict"] == "info"
    assert checks["adapters"]["detail"] == ("registered with lmikit adapters, not in the spec "
                                            "(lmikit deploy keeps them): demo-support")


def test_deploy_removes_what_the_spec_listed_and_keeps_what_was_registered(
        demo: Demo) -> None:
    demo.write_spec("legal", "medical")
    demo.deploy()
    demo.register_support()
    demo.write_spec("legal")
    dry = demo.run("deploy", demo.spec, "--dry-run").output.splitlines()
    assert ("  delete inference-component demo-medical (adapter 'medical' is not in the spec; "
            "--keep-unlisted-adapters keeps it)") in dry
    assert KEPT_SUPPORT in dry
    demo.deploy()
    assert demo.components() == {"demo-base": "InService", "demo-legal": "InService",
                                 "demo-support": "InService"}


def test_prune_removes_every_adapter_the_spec_does_not_list(demo: Demo) -> None:
    demo.register_support()
    dry = demo.run("deploy", demo.spec, "--prune", "--dry-run")
    assert ("  delete inference-component demo-support (adapter 'support' is registered with "
            "`lmikit adapters`, not in the spec; removed by --prune)") in dry.output.splitlines()
    assert "demo-support" in demo.components()  # a dry run changes nothing
    demo.deploy("--prune")
    assert demo.components() == {"demo-base": "InService", "demo-legal": "InService"}
    both = demo.run("deploy", demo.spec, "--prune", "--keep-unlisted-adapters")
    assert both.exit_code == 2 and "choose one" in both.output


def test_adopt_puts_a_registered_adapter_under_the_spec(demo: Demo) -> None:
    demo.register_support()
    demo.write_spec("legal", "support=support-v2")
    refused = demo.run("deploy", demo.spec)
    assert refused.exit_code == 2
    assert "adapter(s) 'support', registered on 'demo' with `lmikit adapters`" in \
        refused.output and "lmikit adapters adopt NAME --spec SPEC" in refused.output
    assert _tags(demo.sm, "demo-support")[MANAGED_BY_TAG] == MANAGED_BY_ADAPTERS

    adopted = demo.run("adapters", "adopt", "support", "--spec", demo.spec)
    assert adopted.exit_code == 0, adopted.output
    assert "support: demo-support InService, managed by the spec" in adopted.stdout
    assert _tags(demo.sm, "demo-support")[MANAGED_BY_TAG] == MANAGED_BY_SPEC

    dry = demo.run("deploy", demo.spec, "--dry-run").output.splitlines()
    assert "  update inference-component demo-support (changed: artifact)" in dry
    demo.deploy()
    artifact = demo.sm.describe_inference_component(InferenceComponentName="demo-support")[
        "Specification"]["Container"]["ArtifactUrl"]
    assert artifact.startswith(f"s3://{BUCKET}/lmikit/demo/adapters/support/")
    demo.write_spec("legal")  # the spec manages it now: out of the spec, out of the endpoint
    demo.deploy()
    assert "demo-support" not in demo.components()


def test_adopt_refuses_an_adapter_the_spec_does_not_list(demo: Demo) -> None:
    demo.register_support()
    refused = demo.run("adapters", "adopt", "support", "--spec", demo.spec)
    assert refused.exit_code == 2
    assert ("AdapterError: adapter 'support' is not in the spec's adapters (legal): add it "
            "there (- {name: support, source: <its folder or s3:// URL>}) first, then adopt "
            "it; nothing was changed") in refused.output
    assert "Traceback" not in refused.output
    assert _tags(demo.sm, "demo-support")[MANAGED_BY_TAG] == MANAGED_BY_ADAPTERS


# --- the Python API ---------------------------------------------------------------------

def _registry(session: Any, clock: VirtualClock) -> AdapterRegistry:
    return AdapterRegistry("docqa", session=session, bucket=BUCKET, clock=clock,
                           poll_seconds=1, retry_mode="standard")


def test_deployment_keeps_a_registered_adapter_unless_pruned(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    _registry(session, clock).register("tax", make_adapter(tmp_path / "more", "tax"))
    kept = deployment(lora_spec, session, clock, tmp_path).deploy()
    assert ("inference-component", "docqa-tax", "kept") in {
        (c.kind, c.name, c.action) for c in kept.changes}
    assert not kept.changed
    planned = deployment(lora_spec, session, clock, tmp_path, prune=True).plan_changes()
    assert ("inference-component", "docqa-tax", "delete") in {
        (c.kind, c.name, c.action) for c in planned}
    deployment(lora_spec, session, clock, tmp_path, prune=True).deploy()
    assert set(live(fake)["inference-component"]) == {"docqa-base", "docqa-legal",
                                                       "docqa-medical"}
    with pytest.raises(DeployError, match="contradict each other"):
        deployment(lora_spec, session, clock, tmp_path, prune=True,
                   keep_unlisted_adapters=True)


def test_deploy_refuses_a_listed_adapter_that_was_registered_and_changes_nothing(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    _registry(session, clock).register("tax", make_adapter(tmp_path / "adapters", "tax"))
    with_tax = spec_with(tmp_path, "adapters:\n  - {name: legal, source: adapters/legal}\n"
                         "  - {name: tax, source: adapters/tax}\n")
    before = len(fake.calls)
    with pytest.raises(DeployError, match=r"adopt NAME --spec SPEC.*nothing was changed|"
                       r"nothing was changed.*adopt NAME --spec SPEC"):
        deployment(with_tax, session, clock, tmp_path).deploy()
    writes = [c.operation for c in fake.calls[before:] if c.service == "sagemaker"
              and c.operation.startswith(("Create", "Update", "Delete", "Add"))]
    assert writes == []
    _registry(session, clock).adopt("tax", with_tax)
    deployment(with_tax, session, clock, tmp_path).deploy()  # the same weights: unchanged
    assert set(live(fake)["inference-component"]) == {"docqa-base", "docqa-legal",
                                                       "docqa-tax"}


def test_components_from_before_managers_were_recorded_keep_what_they_were(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    """An earlier lmikit tagged no manager: the registry's components carry lmikit:adapter,
    the deployer's do not. Listed ones are the spec's; unlisted registered ones are kept."""
    deployment(lora_spec, session, clock, tmp_path).deploy()
    _registry(session, clock).register("tax", make_adapter(tmp_path / "more", "tax"))
    sm = session.client("sagemaker")
    for comp in ("docqa-legal", "docqa-medical", "docqa-tax"):
        arn = sm.describe_inference_component(InferenceComponentName=comp)[
            "InferenceComponentArn"]
        sm.delete_tags(ResourceArn=arn, TagKeys=[MANAGED_BY_TAG])
    only_legal = spec_with(tmp_path, "adapters:\n  - {name: legal, source: adapters/legal}\n")
    lines = [c.line() for c in deployment(only_legal, session, clock, tmp_path).plan_changes()
             if c.kind == "inference-component" and c.action != "unchanged"]
    assert lines == [
        "tag inference-component docqa-legal (lmikit:managed-by=spec)",
        "delete inference-component docqa-medical (adapter 'medical' is not in the spec; "
        "--keep-unlisted-adapters keeps it)",
        "kept inference-component docqa-tax (adapter 'tax' is registered with "
        "`lmikit adapters`, not in the spec; --prune removes it)"]
    deployment(only_legal, session, clock, tmp_path).deploy()
    assert set(live(fake)["inference-component"]) == {"docqa-base", "docqa-legal",
                                                       "docqa-tax"}
    assert _tags(sm, "docqa-legal")[MANAGED_BY_TAG] == MANAGED_BY_SPEC
    assert MANAGED_BY_TAG not in _tags(sm, "docqa-tax")  # deploy does not touch it


def test_replacing_a_failed_base_creates_registered_adapters_again(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    registry = _registry(session, clock)
    tax = registry.register("tax", make_adapter(tmp_path / "more", "tax"))
    registry.register("broken", make_adapter(tmp_path / "more", "broken"))
    fake.control.components["docqa-broken"].status = "Failed"  # it would fail again
    fake.control.components["docqa-base"].status = "Failed"
    planned = {c.name: c.line() for c in deployment(lora_spec, session, clock, tmp_path)
               .plan_changes() if c.kind == "inference-component"}
    assert planned["docqa-tax"] == ("create inference-component docqa-tax (adapter 'tax' is "
                                    "registered with `lmikit adapters`, not in the spec: "
                                    "created again on the new base)")
    assert planned["docqa-broken"] == (
        "delete inference-component docqa-broken (adapter 'broken' is registered with "
        "`lmikit adapters`, not in the spec; it is Failed: not created again on the new base)")
    deployment(lora_spec, session, clock, tmp_path).deploy()
    assert live(fake)["inference-component"] == {
        "docqa-base": "InService", "docqa-legal": "InService", "docqa-medical": "InService",
        "docqa-tax": "InService"}
    sm = session.client("sagemaker")
    again = sm.describe_inference_component(InferenceComponentName="docqa-tax")
    assert again["Specification"]["Container"]["ArtifactUrl"] == tax.artifact_url
    assert _tags(sm, "docqa-tax")[MANAGED_BY_TAG] == MANAGED_BY_ADAPTERS


# --- the tag itself ---------------------------------------------------------------------

def test_manager_tags_fit_botocores_tag_rules_with_the_most_spec_tags(tmp_path: Path) -> None:
    """TagList holds at most 50 tags (botocore's sagemaker model); a spec holds at most 40
    (spec.tags), so a spec adapter's component has at most 40 + lmikit:deployment +
    lmikit:managed-by = 42, and a registered one 3."""
    write_lora_adapter(tmp_path / "adapters" / "legal")
    user_tags = "".join(f"  team-{i}: value-{i}\n" for i in range(40))
    spec = spec_with(tmp_path, "adapters:\n  - {name: legal, source: adapters/legal}\n"
                     f"tags:\n{user_tags}")
    requests = render_requests(spec, plan_spec(spec, tmp_path), image_uri=IMAGE,
                               execution_role_arn=ROLE, model_artifact_url="s3://b/m.tar.gz",
                               adapter_artifact_urls={"legal": "s3://b/a.tar.gz"})
    rendered = requests.adapter_components["legal"]["Tags"]
    registered = deployment_tags("docqa", {ADAPTER_TAG: "legal",
                                           MANAGED_BY_TAG: MANAGED_BY_ADAPTERS})
    tag_list = service_model("sagemaker").operation_model(
        "CreateInferenceComponent").input_shape.members["Tags"]
    assert tag_list.metadata["max"] == 50
    for tags in (rendered, registered):
        assert ShapeValidator().validate(tag_list, tags) == []
    assert len(rendered) == 42 and {"Key": MANAGED_BY_TAG, "Value": MANAGED_BY_SPEC} in rendered
