"""Create, update, inspect and delete one deployment with boto3, idempotently.

A run changes only what differs from the spec: a changed endpoint config becomes a new
config plus UpdateEndpoint; a changed base component goes through UpdateInferenceComponent
with a rolling policy and alarm-based auto-rollback; adapters are created in parallel.
If a step fails (or the user presses Ctrl-C), everything this run created is deleted in
dependency order, what existed before is kept, and the error says exactly what is left.
"""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmikit.deploy._artifacts import (
    StoredArtifact,
    default_bucket,
    delete_artifact,
    ensure_bucket,
    upload_artifact,
)
from lmikit.deploy._aws import (
    Clients,
    Clock,
    ProgressEvent,
    ProgressFn,
    RealClock,
    Waiter,
    call,
    describe_or_none,
    no_progress,
)
from lmikit.errors import DeployError, LmikitError
from lmikit.names import DEPLOYMENT_TAG, base_component_name
from lmikit.render.sagemaker import SageMakerRequests, render_requests
from lmikit.spec import DeploymentSpec

ROLLING_WAIT_SECONDS = 120
ROLLING_TIMEOUT_SECONDS = 3600


@dataclass(frozen=True)
class Change:
    """What a run did (or would do) to one resource."""

    kind: str
    name: str
    action: str  # "create" | "update" | "replace" | "unchanged" | "delete" | "absent"
    detail: str = ""


@dataclass
class DeployResult:
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.action not in ("unchanged", "absent") for c in self.changes)

    def summary(self) -> str:
        if not self.changed:
            return "No changes: every resource already matches the spec."
        done = [c for c in self.changes if c.action not in ("unchanged", "absent")]
        return "; ".join(f"{c.action} {c.kind} {c.name}" for c in done)


@dataclass(frozen=True)
class ResourceState:
    kind: str
    name: str
    status: str
    detail: str = ""


@dataclass
class _Run:
    """Bookkeeping for one deploy: what it created, so a failure can undo exactly that."""

    created: list[tuple[str, str]] = field(default_factory=list)
    uploaded: list[StoredArtifact] = field(default_factory=list)
    updated: list[tuple[str, str]] = field(default_factory=list)
    result: DeployResult = field(default_factory=DeployResult)


class Deployment:
    """One spec's resources on SageMaker.

    >>> from lmikit.testing import FakeSageMaker  # doctest: +SKIP
    >>> Deployment(spec, role_arn=role, bucket="my-bucket").deploy().summary()  # doctest: +SKIP
    'create endpoint-config docqa-qwen7b-1a2b...; create endpoint docqa-qwen7b; ...'

    ``session`` is a boto3 session (one is created for ``spec.region`` if omitted);
    ``clock`` and ``poll_seconds`` control waiting (tests pass the fake's clock);
    ``retry_mode`` is botocore's (adaptive by default: it also slows down after throttling).
    """

    def __init__(self, spec: DeploymentSpec, *, session: Any = None,
                 role_arn: str | None = None, bucket: str | None = None,
                 base_dir: str | Path = ".", image_uri: str | None = None,
                 plan: Any = None, clock: Clock | None = None,
                 progress: ProgressFn = no_progress, poll_seconds: float = 15.0,
                 timeout_seconds: float = 3600.0, max_workers: int = 16,
                 retry_mode: str = "adaptive") -> None:
        self.spec = spec
        self.clients = Clients(session, spec.region, retry_mode)
        self.role_arn = role_arn
        self._bucket = bucket
        self.base_dir = Path(base_dir)
        self._image_uri = image_uri
        self._plan = plan
        self.clock = clock or RealClock()
        self.progress = progress
        self.max_workers = max_workers
        self.waiter = Waiter(self.clients.sagemaker, self.clock, progress, poll_seconds,
                             timeout_seconds)

    # --- inputs ----------------------------------------------------------------------

    @property
    def plan(self) -> Any:
        if self._plan is None:
            from lmikit.plan import plan_spec

            self._plan = plan_spec(self.spec, base_dir=self.base_dir)
        return self._plan

    @property
    def image_uri(self) -> str:
        if self._image_uri is None:
            from lmikit.image import lmi_image_uri

            self._image_uri = lmi_image_uri(self.spec.region, self.spec.engine.lmi_version)
        return self._image_uri

    @property
    def bucket(self) -> str:
        if self._bucket is None:
            self._bucket = default_bucket(self.clients)
        return self._bucket

    def requests(self, run: _Run | None = None) -> SageMakerRequests:
        """Package and upload artifacts (content-addressed), then render every request."""
        from lmikit.adapters import package_spec_adapter
        from lmikit.model_artifact import model_artifact

        if not self.role_arn:
            raise DeployError("an execution role is needed: pass role_arn= (CLI: --role-arn) "
                              "or create one with lmikit.deploy.ensure_execution_role()")
        kms = self.spec.security.kms_key_arn
        s3 = self.clients.s3
        artifacts: list[StoredArtifact] = []
        data = model_artifact(self.spec, self.plan, self.base_dir)
        if data is not None or any(not a.source.startswith("s3://")
                                   for a in self.spec.adapters):
            ensure_bucket(s3, self.bucket, self.spec.region)
        model_url = None
        if data is not None:
            stored = upload_artifact(s3, self.bucket, f"lmikit/{self.spec.name}/model", data,
                                     kms)
            artifacts.append(stored)
            model_url = stored.url
        adapter_urls: dict[str, str] = {}
        for a in self.spec.adapters:
            if a.source.startswith("s3://"):
                adapter_urls[a.name] = a.source
                continue
            package = package_spec_adapter(self.spec, self.plan, a, self.base_dir)
            stored = upload_artifact(s3, self.bucket,
                                     f"lmikit/{self.spec.name}/adapters/{a.name}",
                                     package.data, kms)
            artifacts.append(stored)
            adapter_urls[a.name] = stored.url
        if run is not None:
            run.uploaded += [s for s in artifacts if s.uploaded]
        return render_requests(self.spec, self.plan, image_uri=self.image_uri,
                               execution_role_arn=self.role_arn, model_artifact_url=model_url,
                               adapter_artifact_urls=adapter_urls)

    # --- deploy ----------------------------------------------------------------------

    def deploy(self) -> DeployResult:
        """Create or update every resource; on failure undo this run and raise DeployError."""
        run = _Run()
        try:
            req = self.requests(run)
            self._deploy(req, run)
        except (LmikitError, KeyboardInterrupt) as exc:
            cause = "interrupted by the user" if isinstance(exc, KeyboardInterrupt) else str(exc)
            raise DeployError(self._rollback(run, cause)) from exc
        return run.result

    def _deploy(self, req: SageMakerRequests, run: _Run) -> None:
        sm = self.clients.sagemaker
        names = req.names
        record = run.result.changes.append
        # 1. endpoint config (immutable; its name is a hash of its content)
        if describe_or_none(sm, "describe_endpoint_config",
                            EndpointConfigName=names.endpoint_config) is None:
            call(sm, "create_endpoint_config", **req.endpoint_config)
            run.created.append(("endpoint-config", names.endpoint_config))
            self._note("endpoint-config", names.endpoint_config, "create", "created")
            record(Change("endpoint-config", names.endpoint_config, "create"))
        else:
            self._note("endpoint-config", names.endpoint_config, "unchanged", "exists")
            record(Change("endpoint-config", names.endpoint_config, "unchanged"))
        # 2. endpoint
        self._ensure_endpoint(req, run)
        # 3. base component
        self._ensure_base(req, run)
        # 4. adapters, in parallel
        if req.adapter_components:
            self._parallel([(self._ensure_adapter, (name, body, run))
                            for name, body in req.adapter_components.items()])

    def _ensure_endpoint(self, req: SageMakerRequests, run: _Run) -> None:
        sm = self.clients.sagemaker
        name = req.names.endpoint
        record = run.result.changes.append
        desc = describe_or_none(sm, "describe_endpoint", EndpointName=name)
        if desc and desc["EndpointStatus"] in ("Creating", "Updating", "SystemUpdating",
                                               "RollingBack"):
            desc = self.waiter.in_service("endpoint", name, "wait")
        if desc and desc["EndpointStatus"] == "Deleting":
            self.waiter.gone("endpoint", name)
            desc = None
        if desc and desc["EndpointStatus"] == "Failed":
            self._delete_components_of(name)
            call(sm, "delete_endpoint", EndpointName=name)
            self.waiter.gone("endpoint", name)
            desc = None
            action = "replace"
        else:
            action = "create"
        if desc is None:
            call(sm, "create_endpoint", **req.endpoint)
            run.created.append(("endpoint", name))
            self.waiter.in_service("endpoint", name, action)
            record(Change("endpoint", name, action))
            return
        old_config = desc.get("EndpointConfigName")
        if old_config == req.names.endpoint_config:
            self._note("endpoint", name, "unchanged", desc["EndpointStatus"])
            record(Change("endpoint", name, "unchanged"))
            return
        call(sm, "update_endpoint", EndpointName=name,
             EndpointConfigName=req.names.endpoint_config)
        run.updated.append(("endpoint", name))
        after = self.waiter.in_service("endpoint", name, "update")
        if after.get("EndpointConfigName") != req.names.endpoint_config:
            raise DeployError(f"UpdateEndpoint of {name} was rolled back by SageMaker: "
                              f"{after.get('FailureReason', 'no reason given')}; it still "
                              f"runs endpoint config {after.get('EndpointConfigName')}")
        record(Change("endpoint", name, "update", f"config {old_config} -> "
                      f"{req.names.endpoint_config}"))
        if old_config and self._is_ours(sm, "endpoint-config", old_config):
            call(sm, "delete_endpoint_config", EndpointConfigName=old_config)
            record(Change("endpoint-config", old_config, "delete", "replaced"))

    def _ensure_base(self, req: SageMakerRequests, run: _Run) -> None:
        sm = self.clients.sagemaker
        body = req.base_component
        name = body["InferenceComponentName"]
        record = run.result.changes.append
        desc = self._existing_or_created(body, run, detail="", is_base=True)
        if desc is None:
            return
        spec_diff = _spec_differences(body["Specification"], desc.get("Specification", {}))
        want_copies = body["RuntimeConfig"]["CopyCount"]
        have_copies = desc.get("RuntimeConfig", {}).get("DesiredCopyCount")
        if not spec_diff and want_copies == have_copies:
            self._note("inference-component", name, "unchanged", "InService")
            record(Change("inference-component", name, "unchanged"))
            return
        if spec_diff:
            update: dict[str, Any] = {
                "InferenceComponentName": name,
                "Specification": body["Specification"],
                "RuntimeConfig": body["RuntimeConfig"],
                "DeploymentConfig": self._rolling_config(name),
            }
            call(sm, "update_inference_component", **update)
            detail = "changed: " + ", ".join(spec_diff)
        else:
            call(sm, "update_inference_component_runtime_config", InferenceComponentName=name,
                 DesiredRuntimeConfig={"CopyCount": want_copies})
            detail = f"copies {have_copies} -> {want_copies}"
        run.updated.append(("inference-component", name))
        after = self.waiter.in_service("inference-component", name, "update")
        if _spec_differences(body["Specification"], after.get("Specification", {})) or \
                after.get("RuntimeConfig", {}).get("DesiredCopyCount") != want_copies:
            raise DeployError(f"the update of inference component {name} was rolled back: "
                              f"{after.get('FailureReason', 'no reason given')}; it keeps its "
                              "previous specification")
        record(Change("inference-component", name, "update", detail))

    def _rolling_config(self, base_name: str) -> dict[str, Any]:
        config: dict[str, Any] = {"RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "WaitIntervalInSeconds": ROLLING_WAIT_SECONDS,
            "MaximumExecutionTimeoutInSeconds": ROLLING_TIMEOUT_SECONDS,
            "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
        }}
        alarm = self._ensure_rollback_alarm(base_name)
        if alarm:
            config["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": alarm}]}
        return config

    def _ensure_rollback_alarm(self, base_name: str) -> str | None:
        """A 5xx alarm on the base component that rolls a bad update back."""
        alarms = self.spec.observability.alarms
        if not alarms.enabled:
            return None
        name = f"{base_name}-update-5xx"
        call(self.clients.cloudwatch, "put_metric_alarm", AlarmName=name,
             AlarmDescription=f"lmikit: 5xx errors on {base_name}; rolls back a bad update",
             Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors",
             Dimensions=[{"Name": "InferenceComponentName", "Value": base_name}],
             Statistic="Sum", Period=60, EvaluationPeriods=2, DatapointsToAlarm=2,
             Threshold=1.0, ComparisonOperator="GreaterThanOrEqualToThreshold",
             TreatMissingData="notBreaching")
        return name

    def _existing_or_created(self, body: dict[str, Any], run: _Run, detail: str,
                             is_base: bool) -> dict[str, Any] | None:
        """The component as it stands, or None after creating it (replacing a Failed one,
        and for a base, its adapters first)."""
        sm = self.clients.sagemaker
        name = body["InferenceComponentName"]
        desc = self._settled_component(name)
        action = "create"
        if desc and desc["InferenceComponentStatus"] == "Failed":
            if is_base:
                self._delete_adapters_of(name)
            call(sm, "delete_inference_component", InferenceComponentName=name)
            self.waiter.gone("inference-component", name)
            desc, action = None, "replace"
        if desc is not None:
            return desc
        call(sm, "create_inference_component", **body)
        run.created.append(("inference-component", name))
        self.waiter.in_service("inference-component", name, action)
        run.result.changes.append(Change("inference-component", name, action, detail))
        return None

    def _ensure_adapter(self, key: str, body: dict[str, Any], run: _Run) -> None:
        sm = self.clients.sagemaker
        name = body["InferenceComponentName"]
        record = run.result.changes.append
        desc = self._existing_or_created(body, run, detail=f"adapter {key}", is_base=False)
        if desc is None:
            return
        want = body["Specification"]["Container"]["ArtifactUrl"]
        have = desc.get("Specification", {}).get("Container", {}).get("ArtifactUrl")
        if want == have:
            self._note("inference-component", name, "unchanged", "InService")
            record(Change("inference-component", name, "unchanged", f"adapter {key}"))
            return
        call(sm, "update_inference_component", InferenceComponentName=name,
             Specification=body["Specification"])
        run.updated.append(("inference-component", name))
        after = self.waiter.in_service("inference-component", name, "update")
        if after.get("Specification", {}).get("Container", {}).get("ArtifactUrl") != want:
            raise DeployError(f"the update of adapter {name} was rolled back: "
                              f"{after.get('FailureReason', 'no reason given')}")
        record(Change("inference-component", name, "update", f"adapter {key}: new weights"))

    # --- rollback --------------------------------------------------------------------

    def _rollback(self, run: _Run, cause: str) -> str:
        """Delete what this run created (reverse order) and describe what is left."""
        sm = self.clients.sagemaker
        removed: list[str] = []
        left: list[str] = []
        created = list(run.created)
        components = [n for k, n in created if k == "inference-component"]
        adapters = [n for n in components if n != self._base_name()]
        bases = [n for n in components if n == self._base_name()]
        for group in (adapters, bases):
            jobs = [(self._delete_component_quietly, (n, removed, left)) for n in group]
            self._parallel(jobs, raise_first=False)
        for kind, name in reversed(created):
            try:
                if kind == "endpoint":
                    self._note(kind, name, "rollback", "Deleting")
                    call(sm, "delete_endpoint", EndpointName=name)
                    self.waiter.gone("endpoint", name)
                elif kind == "endpoint-config":
                    call(sm, "delete_endpoint_config", EndpointConfigName=name)
                else:
                    continue
                removed.append(f"{kind} {name}")
            except (LmikitError, KeyboardInterrupt) as exc:
                left.append(f"{kind} {name} (created by this run; could not delete: {exc})")
        for artifact in run.uploaded:
            try:
                delete_artifact(self.clients.s3, artifact)
                removed.append(f"artifact {artifact.url}")
            except LmikitError as exc:
                left.append(f"artifact {artifact.url} (could not delete: {exc})")
        for kind, name in run.updated:
            left.append(f"{kind} {name} (existed before this run; SageMaker keeps or rolls "
                        "back to its previous configuration)")
        lines = [f"deploy of {self.spec.name!r} failed: {cause}"]
        lines.append("Rolled back (created by this run, now deleted): "
                     + (", ".join(removed) if removed else "nothing to roll back"))
        kept = self._kept(run)
        if kept:
            lines.append("Kept (existed before this run): " + ", ".join(kept))
        if left:
            lines.append("Left in place: " + "; ".join(left))
        else:
            lines.append("Nothing this run created is left behind.")
        return "\n".join(lines)

    def _kept(self, run: _Run) -> list[str]:
        mine = set(run.created)
        out = []
        for c in run.result.changes:
            if c.action == "unchanged" and (c.kind, c.name) not in mine:
                out.append(f"{c.kind} {c.name}")
        return out

    def _delete_component_quietly(self, name: str, removed: list[str], left: list[str]) -> None:
        try:
            self._note("inference-component", name, "rollback", "Deleting")
            if describe_or_none(self.clients.sagemaker, "describe_inference_component",
                                InferenceComponentName=name) is not None:
                self._settled_component(name)
                call(self.clients.sagemaker, "delete_inference_component",
                     InferenceComponentName=name)
                self.waiter.gone("inference-component", name)
            removed.append(f"inference-component {name}")
        except (LmikitError, KeyboardInterrupt) as exc:
            left.append(f"inference-component {name} (created by this run; could not delete: "
                        f"{exc})")

    # --- destroy and status --------------------------------------------------------------

    def destroy(self) -> DeployResult:
        """Delete adapters, then base components, then the endpoint and its configs."""
        sm = self.clients.sagemaker
        name = self.spec.name
        result = DeployResult()
        components = self._components(name)
        adapters = [c for c in components if c[1]]
        bases = [c for c in components if not c[1]]
        for group in (adapters, bases):
            self._parallel([(self._delete_component, (n, result)) for n, _ in group])
        desc = describe_or_none(sm, "describe_endpoint", EndpointName=name)
        configs = self._our_configs()
        if desc is not None:
            if desc["EndpointStatus"] != "Deleting":
                call(sm, "delete_endpoint", EndpointName=name)
            self._note("endpoint", name, "delete", "Deleting")
            self.waiter.gone("endpoint", name)
            result.changes.append(Change("endpoint", name, "delete"))
            if desc.get("EndpointConfigName"):
                configs.add(desc["EndpointConfigName"])
        else:
            result.changes.append(Change("endpoint", name, "absent"))
        for cfg in sorted(configs):
            if describe_or_none(sm, "describe_endpoint_config", EndpointConfigName=cfg):
                call(sm, "delete_endpoint_config", EndpointConfigName=cfg)
                self._note("endpoint-config", cfg, "delete", "deleted")
                result.changes.append(Change("endpoint-config", cfg, "delete"))
        if self.spec.observability.alarms.enabled:
            alarm = f"{self._base_name()}-update-5xx"
            found = call(self.clients.cloudwatch, "describe_alarms", AlarmNames=[alarm])
            if found.get("MetricAlarms"):
                call(self.clients.cloudwatch, "delete_alarms", AlarmNames=[alarm])
                result.changes.append(Change("alarm", alarm, "delete"))
        return result

    def _delete_component(self, name: str, result: DeployResult) -> None:
        self._settled_component(name)
        call(self.clients.sagemaker, "delete_inference_component", InferenceComponentName=name)
        self._note("inference-component", name, "delete", "Deleting")
        self.waiter.gone("inference-component", name)
        result.changes.append(Change("inference-component", name, "delete"))

    def status(self) -> list[ResourceState]:
        """Every resource of the deployment with its current state."""
        sm = self.clients.sagemaker
        name = self.spec.name
        rows: list[ResourceState] = []
        desc = describe_or_none(sm, "describe_endpoint", EndpointName=name)
        if desc is None:
            rows.append(ResourceState("endpoint", name, "absent"))
        else:
            detail = f"config {desc.get('EndpointConfigName')}"
            for v in desc.get("ProductionVariants", []):
                detail += (f"; {v['VariantName']}: {v.get('CurrentInstanceCount', '?')} "
                           "instance(s)")
            if desc.get("FailureReason"):
                detail += f"; {desc['FailureReason']}"
            rows.append(ResourceState("endpoint", name, desc["EndpointStatus"], detail))
            cfg = desc.get("EndpointConfigName")
            if cfg:
                exists = describe_or_none(sm, "describe_endpoint_config",
                                          EndpointConfigName=cfg) is not None
                rows.append(ResourceState("endpoint-config", cfg,
                                          "exists" if exists else "deleted", "in use"))
        for comp, base in self._components(name):
            d = describe_or_none(sm, "describe_inference_component", InferenceComponentName=comp)
            if d is None:
                continue
            detail = f"adapter of {base}" if base else "base"
            rc = d.get("RuntimeConfig")
            if rc:
                detail += f"; copies {rc.get('CurrentCopyCount')}/{rc.get('DesiredCopyCount')}"
            if d.get("FailureReason"):
                detail += f"; {d['FailureReason']}"
            rows.append(ResourceState("inference-component", comp,
                                      d["InferenceComponentStatus"], detail))
        if desc is None and not any(r.kind == "inference-component" for r in rows):
            for cfg in sorted(self._our_configs()):
                rows.append(ResourceState("endpoint-config", cfg, "exists", "not in use"))
        return rows

    # --- helpers -----------------------------------------------------------------------

    def _base_name(self) -> str:
        return base_component_name(self.spec.name)

    def _components(self, endpoint: str) -> list[tuple[str, str | None]]:
        """(name, base or None) of every component on the endpoint."""
        sm = self.clients.sagemaker
        out: list[tuple[str, str | None]] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"EndpointNameEquals": endpoint, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = call(sm, "list_inference_components", **kwargs)
            for row in page["InferenceComponents"]:
                d = describe_or_none(sm, "describe_inference_component",
                                     InferenceComponentName=row["InferenceComponentName"])
                if d is not None:
                    out.append((d["InferenceComponentName"],
                                d.get("Specification", {}).get("BaseInferenceComponentName")))
            token = page.get("NextToken")
            if not token:
                return sorted(out)

    def _our_configs(self) -> set[str]:
        sm = self.clients.sagemaker
        out: set[str] = set()
        token = None
        while True:
            kwargs: dict[str, Any] = {"NameContains": self.spec.name, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = call(sm, "list_endpoint_configs", **kwargs)
            for row in page["EndpointConfigs"]:
                if self._is_ours(sm, "endpoint-config", row["EndpointConfigName"],
                                 arn=row["EndpointConfigArn"]):
                    out.add(row["EndpointConfigName"])
            token = page.get("NextToken")
            if not token:
                return out

    def _is_ours(self, sm: Any, kind: str, name: str, arn: str | None = None) -> bool:
        if arn is None:
            desc = describe_or_none(sm, "describe_endpoint_config", EndpointConfigName=name)
            if desc is None:
                return False
            arn = desc["EndpointConfigArn"]
        tags = call(sm, "list_tags", ResourceArn=arn).get("Tags", [])
        return any(t["Key"] == DEPLOYMENT_TAG and t["Value"] == self.spec.name for t in tags)

    def _settled_component(self, name: str) -> dict[str, Any] | None:
        """Describe a component, first waiting out Creating/Updating/Deleting."""
        return self.waiter.settled("inference-component", name)

    def _delete_adapters_of(self, base: str) -> None:
        for comp, b in self._components(self.spec.name):
            if b == base:
                self._delete_component(comp, DeployResult())

    def _delete_components_of(self, endpoint: str) -> None:
        comps = self._components(endpoint)
        for group in ([c for c in comps if c[1]], [c for c in comps if not c[1]]):
            for comp, _ in group:
                self._delete_component(comp, DeployResult())

    def _parallel(self, jobs: list[tuple[Any, tuple[Any, ...]]], raise_first: bool = True
                  ) -> None:
        if not jobs:
            return
        with cf.ThreadPoolExecutor(max_workers=min(self.max_workers, len(jobs))) as pool:
            futures = [pool.submit(fn, *args) for fn, args in jobs]
            errors = []
            for fut in futures:
                try:
                    fut.result()
                except LmikitError as exc:
                    errors.append(exc)
        if errors and raise_first:
            if len(errors) == 1:
                raise errors[0]
            raise DeployError(f"{len(errors)} steps failed: "
                              + "; ".join(str(e) for e in errors))

    def _note(self, kind: str, name: str, action: str, status: str) -> None:
        self.progress(ProgressEvent(kind, name, action, status))


def _spec_differences(want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    """Fields of a base component's Specification that differ from the deployed one."""
    diff = []
    wc, hc = want.get("Container", {}), dict(have.get("Container", {}))
    image = hc.get("DeployedImage", {}).get("SpecifiedImage")
    if wc.get("Image") != image:
        diff.append("image")
    for key, label in (("ArtifactUrl", "artifact"), ("Environment", "environment"),
                       ("ContainerMetricsConfig", "metrics")):
        if (wc.get(key) or None) != (hc.get(key) or None):
            diff.append(label)
    for key, label in (("StartupParameters", "startup timeouts"),
                       ("ComputeResourceRequirements", "compute")):
        if _norm(want.get(key)) != _norm(have.get(key)):
            diff.append(label)
    return diff


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value
