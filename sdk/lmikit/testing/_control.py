"""The fake SageMaker control plane: endpoint configs, endpoints, inference components, models.

State moves on the fake's clock: ``Creating -> InService`` (or ``Failed`` with a reason),
``Updating -> InService`` (a failed update rolls back and sets ``FailureReason``) and
``Deleting -> gone``. Cross-resource rules follow the service: an endpoint needs its config,
a component needs an in-service endpoint and a known variant, an adapter needs its base on
the same endpoint, and neither a base with adapters nor an endpoint with components can be
deleted.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lmikit.testing._models import ModelsMixin
from lmikit.testing._plans import TrainingPlan, TrainingPlansMixin
from lmikit.testing._service import ServiceError, validation

__all__ = ["ControlPlane", "Resource", "ServiceError", "Timings", "validation"]

ACCOUNT = "123456789012"


@dataclass
class Timings:
    """Seconds each transition takes on the fake's clock."""

    endpoint_create: float = 300.0
    endpoint_update: float = 240.0
    component_create: float = 240.0
    component_update: float = 180.0
    adapter_create: float = 5.0
    delete: float = 30.0


@dataclass
class Resource:
    kind: str  # "endpoint-config" | "endpoint" | "inference-component"
    name: str
    arn: str
    request: dict[str, Any]
    created: float
    modified: float
    status: str | None = None
    failure: str | None = None
    pending_at: float | None = None
    pending: Callable[[], None] | None = field(default=None, repr=False)


class ControlPlane(ModelsMixin, TrainingPlansMixin):
    """State and operations. Callers hold no locks; every public method takes the lock."""

    def __init__(self, region: str, clock: Any, timings: Timings,
                 artifact_exists: Callable[[str], bool] | None = None,
                 role_reads: Callable[[str, str], str | None] | None = None) -> None:
        self.region = region
        self.clock = clock
        self.timings = timings
        self.artifact_exists = artifact_exists
        self.role_reads = role_reads
        self.lock = threading.RLock()
        self.configs: dict[str, Resource] = {}
        self.endpoints: dict[str, Resource] = {}
        self.components: dict[str, Resource] = {}
        self.models: dict[str, Any] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.training_plans: dict[str, TrainingPlan] = {}  # ARN -> plan (add_training_plan)

    # --- helpers ---------------------------------------------------------------------

    def arn(self, kind: str, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:{kind}/{name.lower()}"

    def tick(self) -> None:
        """Apply every transition that is due."""
        with self.lock:
            now = self.clock.monotonic()
            for store in (self.endpoints, self.components):
                for res in sorted(store.values(), key=lambda r: r.pending_at or 0):
                    if res.pending and res.pending_at is not None and res.pending_at <= now:
                        action, res.pending, res.pending_at = res.pending, None, None
                        action()

    def _schedule(self, res: Resource, seconds: float, action: Callable[[], None]) -> None:
        res.pending_at = self.clock.monotonic() + max(0.0, seconds)
        res.pending = action

    def _finish_create(self, res: Resource, seconds: float, fail: str | None) -> None:
        """After ``seconds``, the new resource is InService, or Failed with ``fail``."""
        def done() -> None:
            res.modified = self._now_ts()
            if fail:
                res.status, res.failure = "Failed", fail
            else:
                res.status = "InService"
        self._schedule(res, seconds, done)

    def _finish_update(self, res: Resource, seconds: float, fail: str | None,
                       apply: Callable[[], None],
                       after: Callable[[], object] | None = None) -> None:
        """After ``seconds``, the update is applied, or rolled back with ``fail`` as reason;
        either way the resource is InService again (and ``after`` runs)."""
        def done() -> None:
            res.modified = self._now_ts()
            res.status = "InService"
            if fail:
                res.failure = f"Update rolled back: {fail}"
            else:
                apply()
            if after is not None:
                after()
        self._schedule(res, seconds, done)

    def _get(self, store: dict[str, Resource], name: str, what: str) -> Resource:
        res = store.get(name)
        if res is None:
            raise validation(f'Could not find {what} "{self.arn(_arn_kind(what), name)}".')
        return res

    def _set_tags(self, arn: str, tags: list[dict[str, str]] | None) -> None:
        self.tags[arn] = merge_tags({}, tags or [])

    def _now_ts(self) -> float:
        return round(self.clock.time(), 3)

    # --- endpoint configs ------------------------------------------------------------

    def create_endpoint_config(self, p: dict[str, Any]) -> dict[str, Any]:
        name = p["EndpointConfigName"]
        if name in self.configs:
            raise validation(f'Cannot create already existing endpoint configuration '
                             f'"{self.arn("endpoint-config", name)}".')
        variants = p["ProductionVariants"]
        names = [v["VariantName"] for v in variants]
        if len(set(names)) != len(names):
            raise validation("Variant names must be unique within an endpoint configuration.")
        for v in variants:
            if "ModelName" in v:
                raise validation(f'Could not find model "{self.arn("model", v["ModelName"])}".')
            if "InstanceType" not in v:
                raise validation(f"Variant {v['VariantName']}: InstanceType is required for "
                                 "inference component endpoints.")
            self._check_reservation(v)
        if not p.get("ExecutionRoleArn"):
            raise validation("ExecutionRoleArn is required when production variants have no "
                             "ModelName (inference component endpoints).")
        arn = self.arn("endpoint-config", name)
        now = self._now_ts()
        self.configs[name] = Resource("endpoint-config", name, arn, copy.deepcopy(p), now, now)
        self._set_tags(arn, p.get("Tags"))
        return {"EndpointConfigArn": arn}

    def describe_endpoint_config(self, p: dict[str, Any]) -> dict[str, Any]:
        res = self._get(self.configs, p["EndpointConfigName"], "endpoint configuration")
        out = {k: v for k, v in res.request.items() if k != "Tags"}
        return {**out, "EndpointConfigArn": res.arn, "CreationTime": res.created}

    def delete_endpoint_config(self, p: dict[str, Any]) -> dict[str, Any]:
        res = self._get(self.configs, p["EndpointConfigName"], "endpoint configuration")
        del self.configs[res.name]
        self.tags.pop(res.arn, None)
        return {}

    def list_endpoint_configs(self, p: dict[str, Any]) -> dict[str, Any]:
        rows = [{"EndpointConfigName": r.name, "EndpointConfigArn": r.arn,
                 "CreationTime": r.created}
                for r in self.configs.values() if p.get("NameContains", "") in r.name]
        return _page(rows, p, "EndpointConfigs")

    # --- endpoints -------------------------------------------------------------------

    def create_endpoint(self, p: dict[str, Any], fail: str | None, extra: float) -> dict:
        name = p["EndpointName"]
        if name in self.endpoints:
            raise validation(f'Cannot create already existing endpoint '
                             f'"{self.arn("endpoint", name)}".')
        self._get(self.configs, p["EndpointConfigName"], "endpoint configuration")
        arn = self.arn("endpoint", name)
        now = self._now_ts()
        res = Resource("endpoint", name, arn, {"EndpointConfigName": p["EndpointConfigName"]},
                       now, now, status="Creating")
        self.endpoints[name] = res
        self._set_tags(arn, p.get("Tags"))

        self._finish_create(res, self.timings.endpoint_create + extra, fail)
        return {"EndpointArn": arn}

    def update_endpoint(self, p: dict[str, Any], fail: str | None, extra: float) -> dict:
        res = self._get(self.endpoints, p["EndpointName"], "endpoint")
        if res.status != "InService":
            raise validation(f'Cannot update in-progress endpoint "{res.arn}".'
                             if res.status in ("Creating", "Updating", "Deleting") else
                             f'Cannot update endpoint "{res.arn}" in status {res.status}.')
        new = self._get(self.configs, p["EndpointConfigName"], "endpoint configuration")
        old_variants = {v["VariantName"] for v in self._variants(res)}
        used = {str(c.request.get("VariantName")) for c in self._components_of(res.name)}
        lost = used - {v["VariantName"] for v in new.request["ProductionVariants"]}
        if lost and old_variants:
            raise validation(f"Variant(s) {', '.join(sorted(lost))} host inference components "
                             "and cannot be removed by an update.")
        res.status, res.failure = "Updating", None
        res.request["Pending"] = {"EndpointConfigName": new.name, "StartTime": self._now_ts()}

        def switch_config() -> None:
            res.request["EndpointConfigName"] = new.name
        self._finish_update(res, self.timings.endpoint_update + extra, fail, switch_config,
                            after=lambda: res.request.pop("Pending", None))
        return {"EndpointArn": res.arn}

    def describe_endpoint(self, p: dict[str, Any]) -> dict[str, Any]:
        res = self._get(self.endpoints, p["EndpointName"], "endpoint")
        out: dict[str, Any] = {
            "EndpointName": res.name, "EndpointArn": res.arn,
            "EndpointConfigName": res.request["EndpointConfigName"],
            "EndpointStatus": res.status, "CreationTime": res.created,
            "LastModifiedTime": res.modified,
        }
        if res.status == "InService" or res.status == "Updating":
            out["ProductionVariants"] = [{
                "VariantName": v["VariantName"],
                "CurrentInstanceCount": v.get("InitialInstanceCount", 1),
                "DesiredInstanceCount": v.get("InitialInstanceCount", 1),
                **({"ManagedInstanceScaling": v["ManagedInstanceScaling"]}
                   if "ManagedInstanceScaling" in v else {}),
                **({"RoutingConfig": v["RoutingConfig"]} if "RoutingConfig" in v else {}),
            } for v in self._variants(res)]
        if res.failure:
            out["FailureReason"] = res.failure
        if "Pending" in res.request:
            # DescribeEndpointOutput.PendingDeploymentSummary (botocore's model): "only
            # returned when the endpoint is creating or updating with a new endpoint
            # configuration"; EndpointConfigName stays the config in service until then.
            out["PendingDeploymentSummary"] = dict(res.request["Pending"])
        return out

    def delete_endpoint(self, p: dict[str, Any]) -> dict[str, Any]:
        res = self._get(self.endpoints, p["EndpointName"], "endpoint")
        if res.status == "Deleting":
            raise validation(f'Cannot delete endpoint "{res.arn}": it is already being deleted.')
        live = [c.name for c in self._components_of(res.name)]
        if live:
            raise validation(f'Cannot delete endpoint "{res.arn}": it hosts inference '
                             f"components ({', '.join(sorted(live))}); delete them first.")
        res.status = "Deleting"

        def gone() -> None:
            self.endpoints.pop(res.name, None)
            self.tags.pop(res.arn, None)
        self._schedule(res, self.timings.delete, gone)
        return {}

    def list_endpoints(self, p: dict[str, Any]) -> dict[str, Any]:
        rows = [{"EndpointName": r.name, "EndpointArn": r.arn, "CreationTime": r.created,
                 "LastModifiedTime": r.modified, "EndpointStatus": r.status}
                for r in self.endpoints.values()
                if p.get("NameContains", "") in r.name
                and p.get("StatusEquals", r.status) == r.status]
        return _page(rows, p, "Endpoints")

    def _variants(self, endpoint: Resource) -> list[dict[str, Any]]:
        cfg = self.configs.get(endpoint.request["EndpointConfigName"])
        return cfg.request["ProductionVariants"] if cfg else []

    def variant_of(self, component: Resource) -> dict[str, Any]:
        """The production variant a component runs on ({} where its config is gone)."""
        endpoint = self.endpoints[component.request["EndpointName"]]
        return next((v for v in self._variants(endpoint)
                     if v.get("VariantName") == component.request.get("VariantName")), {})

    def _components_of(self, endpoint: str) -> list[Resource]:
        return [c for c in self.components.values() if c.request["EndpointName"] == endpoint]

    # --- inference components --------------------------------------------------------

    def create_inference_component(self, p: dict[str, Any], fail: str | None,
                                   extra: float) -> dict[str, Any]:
        name = p["InferenceComponentName"]
        if name in self.components:
            raise validation(f'Cannot create already existing inference component '
                             f'"{self.arn("inference-component", name)}".')
        endpoint = self._get(self.endpoints, p["EndpointName"], "endpoint")
        if endpoint.status not in ("InService", "Updating"):
            raise validation(f'Endpoint "{endpoint.arn}" is in status {endpoint.status}; '
                             "inference components need an InService endpoint.")
        spec = p.get("Specification")
        if not spec:
            raise validation("Specification is required.")
        request = copy.deepcopy(p)
        base_name = spec.get("BaseInferenceComponentName")
        if base_name:
            self._check_adapter(p, spec, base_name, endpoint)
            request["VariantName"] = self.components[base_name].request["VariantName"]
            seconds = self.timings.adapter_create
        else:
            self._check_base(p, spec, endpoint)
            seconds = self.timings.component_create
        fail = fail or self._artifact_problem(spec, endpoint)
        arn = self.arn("inference-component", name)
        now = self._now_ts()
        res = Resource("inference-component", name, arn, request, now, now, status="Creating")
        self.components[name] = res
        self._set_tags(arn, p.get("Tags"))

        self._finish_create(res, seconds + extra, fail)
        return {"InferenceComponentArn": arn}

    def _check_base(self, p: dict[str, Any], spec: dict[str, Any], endpoint: Resource) -> None:
        variant = p.get("VariantName")
        if not variant:
            raise validation("VariantName is required for an inference component that is not "
                             "an adapter.")
        if variant not in {v["VariantName"] for v in self._variants(endpoint)}:
            raise validation(f'Variant "{variant}" does not exist on endpoint '
                             f'"{endpoint.arn}".')
        if "ModelName" in spec:
            if spec["ModelName"] not in self.models:
                raise validation(
                    f'Could not find model "{self.arn("model", spec["ModelName"])}".')
        elif "Container" not in spec or "Image" not in spec["Container"]:
            raise validation("Specification.Container.Image (or ModelName) is required.")
        if "ComputeResourceRequirements" not in spec:
            raise validation("Specification.ComputeResourceRequirements is required for an "
                             "inference component on an instance-based endpoint.")
        if "RuntimeConfig" not in p:
            raise validation("RuntimeConfig is required for an inference component that is "
                             "not an adapter.")

    def _check_adapter(self, p: dict[str, Any], spec: dict[str, Any], base_name: str,
                       endpoint: Resource) -> None:
        base = self.components.get(base_name)
        if base is None or base.status in ("Failed", "Deleting"):
            state = "does not exist" if base is None else f"is {base.status}"
            raise validation(f'Base inference component "{base_name}" {state}.')
        if base.request["EndpointName"] != endpoint.name:
            raise validation(f'Base inference component "{base_name}" is on endpoint '
                             f'"{base.request["EndpointName"]}", not "{endpoint.name}".')
        if base.request["Specification"].get("BaseInferenceComponentName"):
            raise validation(f'"{base_name}" is itself an adapter; adapters cannot be stacked.')
        bad = [k for k in ("ComputeResourceRequirements", "ModelName", "StartupParameters")
               if k in spec]
        if bad or "Image" in spec.get("Container", {}) or "RuntimeConfig" in p:
            raise validation("An adapter inference component takes only "
                             "BaseInferenceComponentName and Container.ArtifactUrl; remove "
                             + ", ".join(bad + (["Container.Image"] if "Image" in
                                                spec.get("Container", {}) else [])
                                         + (["RuntimeConfig"] if "RuntimeConfig" in p else [])))
        if not spec.get("Container", {}).get("ArtifactUrl"):
            raise validation("An adapter inference component needs Container.ArtifactUrl.")

    def _artifact_problem(self, spec: dict[str, Any], endpoint: Resource) -> str | None:
        """Why SageMaker cannot download the component's artifact with the endpoint's
        execution role (S3 answers 403 before it says whether the object exists)."""
        url = spec.get("Container", {}).get("ArtifactUrl")
        if not url:
            return None
        config = self.configs.get(endpoint.request["EndpointConfigName"])
        role = config.request.get("ExecutionRoleArn") if config else None
        denied = self.role_reads(role, url) if role and self.role_reads else None
        if denied:
            # SageMaker's FailureReason for a download it may not make (quoted in
            # aws-samples/cvat-on-aws-china issue 3), with the reason the fake found.
            return (f'Failed to download model data from URL: "{url}". Please ensure that '
                    f'there is an object located at the URL and that the role "{role}" has '
                    f"permissions to download the object ({denied}).")
        if self.artifact_exists and not self.artifact_exists(url):
            return f"Failed to download model data from {url}: the object does not exist."
        return None

    def describe_inference_component(self, p: dict[str, Any]) -> dict[str, Any]:
        res = self._get(self.components, p["InferenceComponentName"], "inference component")
        return self._summary(res, detail=True)

    def _summary(self, res: Resource, detail: bool = False) -> dict[str, Any]:
        r = res.request
        out: dict[str, Any] = {
            "InferenceComponentName": res.name, "InferenceComponentArn": res.arn,
            "EndpointName": r["EndpointName"], "EndpointArn": self.arn("endpoint",
                                                                       r["EndpointName"]),
            "VariantName": r["VariantName"], "InferenceComponentStatus": res.status,
            "CreationTime": res.created, "LastModifiedTime": res.modified,
        }
        if not detail:
            return out
        spec = copy.deepcopy(r["Specification"])
        container = spec.get("Container")
        if container and "Image" in container:
            image = container.pop("Image")
            container["DeployedImage"] = {"SpecifiedImage": image, "ResolvedImage": image,
                                          "ResolutionTime": res.created}
        out["Specification"] = spec
        if "RuntimeConfig" in r:
            copies = r["RuntimeConfig"]["CopyCount"]
            current = copies if res.status in ("InService", "Updating") else 0
            out["RuntimeConfig"] = {"DesiredCopyCount": copies, "CurrentCopyCount": current}
        if res.failure:
            out["FailureReason"] = res.failure
        if "LastDeploymentConfig" in r:
            out["LastDeploymentConfig"] = r["LastDeploymentConfig"]
        return out

    def update_inference_component(self, p: dict[str, Any], fail: str | None,
                                   extra: float) -> dict[str, Any]:
        res = self._get(self.components, p["InferenceComponentName"], "inference component")
        if res.status != "InService":
            raise validation(f'Cannot update inference component "{res.arn}" in status '
                             f"{res.status}.")
        new = copy.deepcopy(res.request)
        if "Specification" in p:
            spec = p["Specification"]
            is_adapter = bool(res.request["Specification"].get("BaseInferenceComponentName"))
            if bool(spec.get("BaseInferenceComponentName")) != is_adapter or (
                    is_adapter and spec["BaseInferenceComponentName"]
                    != res.request["Specification"]["BaseInferenceComponentName"]):
                raise validation("BaseInferenceComponentName cannot be changed by an update.")
            new["Specification"] = copy.deepcopy(spec)
            fail = fail or self._artifact_problem(
                spec, self._get(self.endpoints, res.request["EndpointName"], "endpoint"))
        if "RuntimeConfig" in p:
            new["RuntimeConfig"] = copy.deepcopy(p["RuntimeConfig"])
        if "DeploymentConfig" in p:
            new["LastDeploymentConfig"] = copy.deepcopy(p["DeploymentConfig"])
        return self._start_update(res, new, fail, extra)

    def update_inference_component_runtime_config(self, p: dict[str, Any], fail: str | None,
                                                  extra: float) -> dict[str, Any]:
        res = self._get(self.components, p["InferenceComponentName"], "inference component")
        if "RuntimeConfig" not in res.request:
            raise validation("An adapter inference component has no copy count to update.")
        if res.status != "InService":
            raise validation(f'Cannot update inference component "{res.arn}" in status '
                             f"{res.status}.")
        new = copy.deepcopy(res.request)
        new["RuntimeConfig"] = {"CopyCount": p["DesiredRuntimeConfig"]["CopyCount"]}
        return self._start_update(res, new, fail, extra)

    def _start_update(self, res: Resource, new: dict[str, Any], fail: str | None,
                      extra: float) -> dict[str, Any]:
        res.status, res.failure = "Updating", None

        def apply_spec() -> None:
            res.request = new
        self._finish_update(res, self.timings.component_update + extra, fail, apply_spec)
        return {"InferenceComponentArn": res.arn}

    def delete_inference_component(self, p: dict[str, Any]) -> dict[str, Any]:
        res = self._get(self.components, p["InferenceComponentName"], "inference component")
        if res.status == "Deleting":
            return {}
        adapters = [c.name for c in self.components.values()
                    if c.request["Specification"].get("BaseInferenceComponentName") == res.name]
        if adapters:
            raise validation(f'Cannot delete inference component "{res.arn}": adapter '
                             f"components depend on it ({', '.join(sorted(adapters))}); delete "
                             "them first.")
        res.status = "Deleting"

        def gone() -> None:
            self.components.pop(res.name, None)
            self.tags.pop(res.arn, None)
        self._schedule(res, self.timings.delete, gone)
        return {}

    def list_inference_components(self, p: dict[str, Any]) -> dict[str, Any]:
        rows = [self._summary(r) for r in self.components.values()
                if p.get("NameContains", "") in r.name
                and p.get("EndpointNameEquals", r.request["EndpointName"])
                == r.request["EndpointName"]
                and p.get("StatusEquals", r.status) == r.status
                and p.get("VariantNameEquals", r.request["VariantName"])
                == r.request["VariantName"]]
        return _page(rows, p, "InferenceComponents")

    # --- tags ------------------------------------------------------------------------

    def list_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        arn = p["ResourceArn"]
        if arn not in self.tags:
            raise validation(f'Could not find resource "{arn}".')
        return {"Tags": [{"Key": k, "Value": v} for k, v in sorted(self.tags[arn].items())]}

    def add_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        """Adds or overwrites (botocore's AddTags documentation)."""
        arn = p["ResourceArn"]
        if arn not in self.tags:
            raise validation(f'Could not find resource "{arn}".')
        self.tags[arn] = merge_tags(self.tags[arn], p["Tags"])
        return {"Tags": p["Tags"]}

    def delete_tags(self, p: dict[str, Any]) -> dict[str, Any]:
        """Removes the keys named; a key the resource does not carry is no error."""
        arn = p["ResourceArn"]
        if arn not in self.tags:
            raise validation(f'Could not find resource "{arn}".')
        for key in p["TagKeys"]:
            self.tags[arn].pop(key, None)
        return {}


# Tag rules the service enforces beyond botocore's shapes ("Tagging AWS resources", AWS
# General Reference: at most 50 user tags per resource; the aws: prefix is reserved for AWS).
MAX_TAGS_PER_RESOURCE = 50
RESERVED_TAG_PREFIX = "aws:"


def merge_tags(have: dict[str, str], tags: list[dict[str, str]]) -> dict[str, str]:
    """``have`` with ``tags`` added or overwritten, or the service's ValidationException."""
    merged = dict(have)
    for tag in tags:
        if tag["Key"].lower().startswith(RESERVED_TAG_PREFIX):
            raise validation(f"Tag keys cannot start with '{RESERVED_TAG_PREFIX}': "
                             f"{tag['Key']!r} is reserved for AWS use.")
        merged[tag["Key"]] = tag.get("Value", "")
    if len(merged) > MAX_TAGS_PER_RESOURCE:
        raise validation(f"A resource can have at most {MAX_TAGS_PER_RESOURCE} tags; this "
                         f"request would give it {len(merged)}.")
    return merged


def _arn_kind(what: str) -> str:
    return {"endpoint configuration": "endpoint-config",
            "inference component": "inference-component"}.get(what, what)


def _page(rows: list[dict[str, Any]], p: dict[str, Any], key: str) -> dict[str, Any]:
    rows = sorted(rows, key=lambda r: r["CreationTime"],
                  reverse=p.get("SortOrder", "Descending") == "Descending")
    start = int(p.get("NextToken") or 0)
    size = p.get("MaxResults", 10)
    out: dict[str, Any] = {key: rows[start:start + size]}
    if start + size < len(rows):
        out["NextToken"] = str(start + size)
    return out
