"""``lmikit doctor``: check a live deployment against its spec and plan, and say what to fix.

Every check reads the account (read calls only) and returns a :class:`Check` with a verdict:
``ok``, ``warn``, ``fail`` (something is wrong: the CLI exits 1), ``wait`` (a resource is
Creating, Updating or Deleting: judged once it settles, so run doctor again), ``skip`` (no
data to judge) or ``info`` (reported, not judged). Doctor never waits for a resource; it
reads each status once. Where the data comes from:

- drift: the deployer's own dry run (:meth:`lmikit.deploy.Deployment.plan_changes`, without
  waiting: not compared while a resource is changing), and ``serving.properties`` read back
  from the deployed model artifact in S3; adapters registered with ``lmikit adapters``, which
  a deploy keeps, are ``info``, not drift;
- health: DescribeEndpoint / DescribeInferenceComponent (status, ``FailureReason``: a Failed
  adapter), CloudWatch alarms of the deployment in ALARM, and SageMaker's
  ``Invocation4XXErrors`` / ``Invocation5XXErrors`` over the window;
- the cache pays: the container's ``LMIKit/Container`` counters over the window (GPU prefix
  cache and LMCache hit tokens) against the simulator (:mod:`lmikit.sim`) for the spec's
  workload, routing and KV-cache mode, and the same workload under the alternatives the spec
  did not choose (KV cache on, sticky sessions) to say why when it does not pay;
- sessions: SageMaker publishes no per-session placement: the container must enable
  sessions when the routing relies on them;
- TTFT: the client metric ``LMIKit/Client`` ``TimeToFirstToken`` (published by
  ``Endpoint(..., publish_metrics=True)``) against the simulated TTFT.

An AWS call that fails (credentials, permissions, network, throttling past botocore's
retries) raises :class:`lmikit.errors.AwsError`: doctor could not check, not a failed check.

>>> Check("drift", "ok", "every resource matches the spec").line()
'ok    drift: every resource matches the spec'
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmikit.metric_catalog import CLIENT_NAMESPACE, CONTAINER_NAMESPACE, NS_SAGEMAKER
from lmikit.names import base_component_name
from lmikit.spec import DeploymentSpec

VERDICTS = ("ok", "warn", "fail", "wait", "skip", "info")
AGAIN = "run lmikit doctor again once it is InService"
HIT_RATE_TOLERANCE = 0.2
"""A measured hit rate this far (absolute) below the simulated one fails: the simulator's
workload is the spec's summary of the traffic, not the traffic itself."""
WORTH_IT = 0.2
"""An alternative (KV cache on, sticky routing) the simulator predicts this much more hit
rate for is named as the fix."""
TTFT_FACTOR = 2.0
ERROR_RATE_FAIL = 0.01
PLAN_ENDING_S = 7 * 86400
"""A training plan that ends sooner than this warns: when it expires the endpoint stops
serving (SageMaker's guide, "Using training plans for SageMaker inference endpoints")."""


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.verdict:<5} {self.name}: {self.detail}"
        return f"{text} (fix: {self.fix})" if self.fix else text


@dataclass
class Report:
    deployment: str
    window_s: float
    checks: list[Check] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)
    predicted: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """No check failed (a check that waits on a change in progress does not fail)."""
        return not any(c.verdict == "fail" for c in self.checks)

    @property
    def settled(self) -> bool:
        """No check waits on a resource SageMaker is still changing."""
        return not any(c.verdict == "wait" for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "window_s": self.window_s,
                "healthy": self.healthy, "settled": self.settled,
                "checks": [asdict(c) for c in self.checks],
                "measured": self.measured, "predicted": self.predicted}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


class Doctor:
    """The checks of one spec's deployment. ``now`` (a datetime) fixes the window's end."""

    def __init__(self, spec: DeploymentSpec, *, session: Any = None, base_dir: str | Path = ".",
                 role_arn: str | None = None, bucket: str | None = None,
                 image_uri: str | None = None, since_s: float = 3600.0,
                 now: dt.datetime | None = None) -> None:
        from lmikit.aws import Clients

        self.spec = spec
        self.session = session
        self.base_dir = Path(base_dir)
        self.clients = Clients(session, spec.region, "standard")
        self.role_arn = role_arn
        self.bucket = bucket
        self.image_uri = image_uri
        self.since_s = since_s
        self.now = now or dt.datetime.now(dt.timezone.utc)
        self.base = base_component_name(spec.name)
        self.changing: list[str] = []  # resources health() found in transition

    # --- metrics ---------------------------------------------------------------------

    def _stat(self, namespace: str, metric: str, dims: dict[str, str], stat: str) -> float | None:
        from lmikit.aws import call

        period = max(60, int(self.since_s) // 60 * 60)
        points = call(
            self.clients.cloudwatch, "get_metric_statistics",
            Namespace=namespace, MetricName=metric,
            Dimensions=[{"Name": k, "Value": v} for k, v in dims.items()],
            StartTime=self.now - dt.timedelta(seconds=self.since_s),
            EndTime=self.now + dt.timedelta(seconds=60), Period=period,
            Statistics=[stat])["Datapoints"]
        if not points:
            return None
        if stat == "Average":
            counts = call(
                self.clients.cloudwatch, "get_metric_statistics",
                Namespace=namespace, MetricName=metric,
                Dimensions=[{"Name": k, "Value": v} for k, v in dims.items()],
                StartTime=self.now - dt.timedelta(seconds=self.since_s),
                EndTime=self.now + dt.timedelta(seconds=60), Period=period,
                Statistics=["SampleCount", "Sum"])["Datapoints"]
            n = sum(p["SampleCount"] for p in counts)
            return sum(p["Sum"] for p in counts) / n if n else None
        return float(sum(p[stat] for p in points))

    def measured_cache(self) -> dict[str, float] | None:
        dims = {"EndpointName": self.spec.name, "InferenceComponentName": self.base}
        names = ("GpuPrefixCacheQueryTokens", "GpuPrefixCacheHitTokens",
                 "ExternalPrefixCacheHitTokens")
        sums = {n: self._stat(CONTAINER_NAMESPACE, n, dims, "Sum") for n in names}
        queries = sums["GpuPrefixCacheQueryTokens"]
        if not queries:
            return None
        gpu = (sums["GpuPrefixCacheHitTokens"] or 0.0) / queries
        ext = (sums["ExternalPrefixCacheHitTokens"] or 0.0) / queries
        out = {"prompt_tokens": queries, "gpu": round(gpu, 4), "lmcache": round(ext, 4),
               "total": round(gpu + ext, 4)}
        speed = self._stat(CONTAINER_NAMESPACE, "LMCacheRetrieveSpeedMean", dims, "Average")
        if speed is not None:
            out["retrieve_tokens_per_s"] = round(speed, 1)
        return out

    # --- checks ----------------------------------------------------------------------

    def run(self) -> Report:
        report = Report(self.spec.name, self.since_s)
        endpoint = self._describe("describe_endpoint", EndpointName=self.spec.name)
        if endpoint is None:
            report.checks.append(Check("endpoint", "fail",
                                       f"endpoint {self.spec.name} does not exist in "
                                       f"{self.spec.region}", "deploy it: lmikit deploy SPEC"))
            return report
        report.checks += self.health(endpoint)
        capacity = self.capacity()
        if capacity is not None:
            report.checks.append(capacity)
        report.checks += self.drift(endpoint)
        report.checks += self.cache(report)
        report.checks.append(self.sessions())
        report.checks.append(self.ttft(report))
        return report

    def _describe(self, op: str, **kwargs: Any) -> dict[str, Any] | None:
        """The description, or None when the resource does not exist."""
        from lmikit.aws import describe_or_none

        return describe_or_none(self.clients.sagemaker, op, **kwargs)

    def health(self, endpoint: dict[str, Any]) -> list[Check]:
        return [self._endpoint_check(endpoint), self._components_check(),
                self._alarms_check(), self._errors_check()]

    def capacity(self) -> Check | None:
        """The training plan the spec runs in: Active, of the spec's type, large enough for
        instance.max_count, and not about to end. None when the spec names none."""
        arn = self.spec.instance.capacity_reservation_arn
        if not arn:
            return None
        kind, _, name = arn.split(":", 5)[5].partition("/")
        if kind != "training-plan":
            return Check("capacity", "skip", f"{arn} is not a training plan, the only "
                         "reservation doctor reads")
        plan = self._describe("describe_training_plan", TrainingPlanName=name)
        renew = ("reserve a new plan, set instance.capacity_reservation_arn to it and run "
                 "lmikit deploy SPEC (or choose a type sold on demand)")
        if plan is None:
            return Check("capacity", "fail", f"training plan {name} does not exist in "
                         f"{self.spec.region}: the endpoint cannot start instances", renew)
        status, end = plan.get("Status"), plan.get("EndTime")
        if status in ("Expired", "Failed"):
            return Check("capacity", "fail", f"training plan {name} is {status}: the endpoint "
                         "stops serving when its plan ends", renew)
        types = {c.get("InstanceType") for c in plan.get("ReservedCapacitySummaries", [])}
        if types and self.spec.instance.type not in types:
            return Check("capacity", "fail", f"training plan {name} reserves "
                         f"{', '.join(sorted(t for t in types if t))}, not instance.type "
                         f"{self.spec.instance.type}", renew)
        if status != "Active":
            start = plan.get("StartTime")
            return Check("capacity", "warn", f"training plan {name} is {status}"
                         + (f", from {start:%Y-%m-%d %H:%M} UTC" if start else "")
                         + ": the endpoint serves only inside the plan's window", AGAIN)
        count = plan.get("TotalInstanceCount")
        if count is not None and self.spec.instance.max_count > count:
            return Check("capacity", "warn", f"instance.max_count {self.spec.instance.max_count}"
                         f" is more than the {count} instance(s) training plan {name} reserves: "
                         "scaling past them launches nothing (capacity-reservations-only)",
                         f"lower instance.max_count to {count}, or reserve more")
        left = (end - self.now).total_seconds() if end else None
        if left is not None and left <= 0:
            return Check("capacity", "fail", f"training plan {name} ended "
                         f"{end:%Y-%m-%d %H:%M} UTC: the endpoint stops serving when its plan "
                         "ends", renew)
        if left is not None and left < PLAN_ENDING_S:
            return Check("capacity", "warn", f"training plan {name} ends {end:%Y-%m-%d %H:%M} "
                         f"UTC, in {left / 3600:.0f} h: the endpoint stops serving then", renew)
        return Check("capacity", "ok", f"training plan {name} is Active"
                     + (f" until {end:%Y-%m-%d} " if end else " ")
                     + f"with {count} instance(s) of {self.spec.instance.type}")

    def _endpoint_check(self, endpoint: dict[str, Any]) -> Check:
        from lmikit.aws import TRANSITIONAL

        status = endpoint.get("EndpointStatus")
        if status in TRANSITIONAL:
            self.changing.append(f"endpoint {self.spec.name} is {status}")
            serving = " (it keeps serving while SageMaker applies the change)" \
                if status in ("Updating", "SystemUpdating") else ""
            return Check("endpoint", "wait", f"endpoint is {status}{serving}", AGAIN)
        if status != "InService":
            return Check("endpoint", "fail", f"endpoint is {status}: "
                         f"{endpoint.get('FailureReason') or 'no reason given'}",
                         "see the endpoint's CloudWatch logs; lmikit deploy SPEC")
        return Check("endpoint", "ok", "endpoint is InService")

    def _components_check(self) -> Check:
        from lmikit.aws import TRANSITIONAL, paginate

        names = [c["InferenceComponentName"] for c in paginate(
            self.clients.sagemaker, "list_inference_components", "InferenceComponents",
            EndpointNameEquals=self.spec.name)]
        bad, changing = [], []
        for name in sorted(names):
            desc = self._describe("describe_inference_component", InferenceComponentName=name)
            if desc is None:
                continue
            st = desc.get("InferenceComponentStatus")
            kind = "adapter" if desc.get("Specification", {}).get(
                "BaseInferenceComponentName") else "component"
            if st in TRANSITIONAL:
                changing.append(f"{kind} {name} is {st}")
            elif st != "InService":
                bad.append(f"{kind} {name} is {st}"
                           + (f": {desc['FailureReason']}" if desc.get("FailureReason") else ""))
        self.changing += changing
        if bad:
            return Check("components", "fail", "; ".join(bad + changing),
                         "fix the adapter/artifact named and lmikit deploy SPEC (or lmikit "
                         "adapters remove NAME)")
        if changing:
            return Check("components", "wait", "; ".join(changing) + " (SageMaker is "
                         "applying a change; an updating component keeps serving)",
                         "run lmikit doctor again once they are InService")
        return Check("components", "ok", f"{len(names)} component(s) InService")

    def _alarms_check(self) -> Check:
        from botocore.exceptions import BotoCoreError, ClientError

        from lmikit.aws import map_error
        from lmikit.render import alarm_prefix

        try:  # metric and composite alarms come in one listing: paginate() takes one key
            pages = list(self.clients.cloudwatch.get_paginator("describe_alarms").paginate(
                AlarmNamePrefix=alarm_prefix(self.spec), StateValue="ALARM"))
        except (ClientError, BotoCoreError) as exc:
            raise map_error(exc, "describe_alarms") from exc
        alarms = [a["AlarmName"] for page in pages
                  for a in page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
                  if a.get("StateValue") == "ALARM"]  # moto drops StateValue next to a prefix
        if alarms:
            return Check("alarms", "fail", "in ALARM: " + ", ".join(sorted(alarms)),
                         "see docs/observability.md#alarms for what each alarm means")
        return Check("alarms", "ok", "no alarm of the deployment in ALARM")

    def _errors_check(self) -> Check:
        dims = {"EndpointName": self.spec.name, "VariantName": "AllTraffic"}
        calls = self._stat(NS_SAGEMAKER, "Invocations", dims, "Sum") or 0.0
        e4 = self._stat(NS_SAGEMAKER, "Invocation4XXErrors", dims, "Sum") or 0.0
        e5 = self._stat(NS_SAGEMAKER, "Invocation5XXErrors", dims, "Sum") or 0.0
        if not calls:
            return Check("errors", "skip", "no invocations in the window")
        if e5 / calls >= ERROR_RATE_FAIL:
            return Check("errors", "fail", f"{e5:.0f} 5xx of {calls:.0f} invocations",
                         "read the container log for the failing requests")
        if e4 / calls >= ERROR_RATE_FAIL:
            return Check("errors", "warn", f"{e4:.0f} 4xx of {calls:.0f} invocations",
                         "clients send requests LMI rejects: check their bodies")
        return Check("errors", "ok", f"{calls:.0f} invocations, {e4:.0f} 4xx, {e5:.0f} 5xx")

    def deployment(self, endpoint: dict[str, Any]) -> Any:
        from lmikit.aws import call
        from lmikit.deploy._deployment import Deployment

        sm = self.clients.sagemaker
        role = self.role_arn
        if role is None:
            config = call(sm, "describe_endpoint_config",
                          EndpointConfigName=endpoint["EndpointConfigName"])
            role = config.get("ExecutionRoleArn")
        image = self.image_uri
        if image is None:  # the container's, or the Model's when it names one (S3 weights)
            from lmikit.aws import component_image

            desc = self._describe("describe_inference_component",
                                  InferenceComponentName=self.base)
            image = component_image(sm, desc) if desc else None
        return Deployment(self.spec, session=self.session, role_arn=role, bucket=self.bucket,
                          base_dir=self.base_dir, image_uri=image)

    def drift(self, endpoint: dict[str, Any]) -> list[Check]:
        from lmikit.errors import DeployError, WaitTimeout

        d = self.deployment(endpoint)
        again = "run lmikit doctor again once every resource is InService"
        if self.changing:  # the dry run compares settled resources; doctor does not wait
            out = [Check("drift", "wait", "not compared while " + "; ".join(self.changing),
                         again)]
        else:
            try:
                planned = d.plan_changes(wait=False)
            except WaitTimeout as exc:  # began changing since health() read it
                out = [Check("drift", "wait", f"not compared: {exc}", again)]
            except DeployError as exc:  # a deploy would refuse: the message says why
                out = [Check("drift", "fail", f"lmikit deploy SPEC would refuse: {exc}",
                             "see the message")]
            else:
                changes = [c for c in planned if c.changed and c.kind != "artifact"]
                out = [Check("drift", "fail", "; ".join(c.line() for c in changes),
                             "lmikit deploy SPEC (lmikit deploy SPEC --dry-run shows the same "
                             "list)")
                       if changes else Check("drift", "ok", "every resource matches what the "
                                             "spec renders (the deployer's dry run)")]
                out += self.registered_adapters(planned)
        out.append(self.properties_drift(d))
        return out

    @staticmethod
    def registered_adapters(planned: list[Any]) -> list[Check]:
        """The adapters a deploy keeps because ``lmikit adapters`` registered them: info."""
        kept = [c.name for c in planned if c.kind == "inference-component"
                and c.action == "kept"]
        if not kept:
            return []
        return [Check("adapters", "info", f"registered with lmikit adapters, not in the spec "
                      f"(lmikit deploy keeps them): {', '.join(kept)}",
                      "none needed; to manage one from the spec, add it to the spec's adapters "
                      "and run lmikit adapters adopt NAME --spec SPEC")]

    def properties_drift(self, d: Any) -> Check:
        from lmikit.render import (
            SERVING_PROPERTIES,
            parse_properties,
            read_artifact_files,
            serving_properties,
        )

        desc = self._describe("describe_inference_component", InferenceComponentName=self.base)
        url = (((desc or {}).get("Specification") or {}).get("Container") or {}).get(
            "ArtifactUrl")
        if not url:
            return Check("serving.properties", "skip", "the base component has no model "
                         "artifact (options are in the environment, compared above)")
        from lmikit.aws import call, is_not_found, map_error, read_errors
        from lmikit.errors import AwsError

        bucket, key = url[len("s3://"):].split("/", 1)
        try:
            body = call(self.clients.s3, "get_object", Bucket=bucket, Key=key)["Body"]
            data = body.read()
        except AwsError as exc:
            if not is_not_found(exc):
                raise  # doctor could not look: not a verdict on the artifact
            return Check("serving.properties", "fail", f"the model artifact {url} is "
                         f"missing: {exc}", "lmikit deploy SPEC uploads it again")
        except read_errors() as exc:
            raise map_error(exc, "get_object") from exc
        have = parse_properties(read_artifact_files(data).get(SERVING_PROPERTIES, b"")
                                .decode())
        want = parse_properties(serving_properties(self.spec, d.plan, image=d.image_kind))
        diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
        if diff:
            return Check("serving.properties", "fail", "deployed artifact differs in "
                         + ", ".join(f"{k} ({have.get(k)!r} != {want.get(k)!r})"
                                     for k in diff[:5]), "lmikit deploy SPEC")
        return Check("serving.properties", "ok", f"{url} matches the spec")

    # --- the cache -------------------------------------------------------------------

    def simulated(self) -> dict[str, Any]:
        """Hit rates and TTFT the simulator expects for the spec, and for the alternatives."""
        from lmikit.planner import plan_spec
        from lmikit.render import copies_one_instance_holds
        from lmikit.sim import deployment_from_spec, long_doc_qa, simulate

        w = self.spec.workload
        plan = plan_spec(self.spec, self.base_dir)
        mode = {"none": "off"}.get(plan.tier, plan.tier)
        routing = self.spec.routing.strategy
        dep = deployment_from_spec(self.spec, self.base_dir)
        if w.reused_context_tokens <= 0:
            return {"mode": mode, "routing": routing, "reuse": False}
        docs = max(1, w.reused_context_tokens // max(1, w.typical_request_tokens))
        work = long_doc_qa(docs, max(1, w.typical_request_tokens - w.unique_suffix_tokens),
                           w.output_tokens, w.concurrency, self.spec.kv_cache.chunk_size)
        # sessions pin an instance, not a copy: sticky is no alternative where copies share one
        # (lmikit.render's sessions_problem)
        sticky_ok = copies_one_instance_holds(self.spec, plan) == 1
        routings: list[str] = [str(routing)]
        if routing not in ("sticky_session", "prefix_aware") and sticky_ok:
            routings.append("sticky_session")
        modes = [mode] + (["cpu"] if mode == "off" else [])
        results = {(r.routing, r.kv_cache): r for r in simulate(dep, work, routings, modes)}

        def total(r: Any) -> float:
            return round(1.0 - r.hit_rate["miss"], 4)

        mine = results[(routing, mode)]
        return {"mode": mode, "routing": routing, "reuse": True, "copies": dep.instances,
                "gpu": round(mine.hit_rate.get("gpu", 0.0), 4),
                "lmcache": round(sum(v for k, v in mine.hit_rate.items()
                                     if k not in ("gpu", "miss")), 4),
                "total": total(mine), "ttft_p50_s": mine.ttft_p50_s,
                "ttft_p90_s": mine.ttft_p90_s,
                "alternatives": {f"{r}/{m}": total(v) for (r, m), v in results.items()
                                 if (r, m) != (routing, mode)}}

    def cache(self, report: Report) -> list[Check]:
        sim = self.simulated()
        report.predicted = sim
        got = self.measured_cache()
        report.measured["cache"] = got
        if not sim.get("reuse"):
            return [Check("cache", "skip", "the spec's workload reuses no context "
                          "(workload.reused_context_tokens is 0): no hit rate to expect")]
        if got is None:
            return [Check("cache", "skip", f"no {CONTAINER_NAMESPACE} metrics in the window: "
                          "no traffic, or the image publishes none (lmikit's image with "
                          "observability.detailed_metrics does)", "send traffic, or widen --since")]
        why: list[tuple[str, str]] = []
        alts = sim["alternatives"]
        with_cpu = alts.get(sim["routing"] + "/cpu", 0.0)
        if sim["mode"] == "off" and with_cpu - sim["total"] >= WORTH_IT:
            why.append((f"kv_cache.mode is off: only the GPU prefix cache keeps context, and the "
                        f"workload's {self.spec.workload.reused_context_tokens} reused tokens do "
                        f"not stay there; with mode cpu the simulator expects {_pct(with_cpu)}",
                        "set kv_cache.mode: cpu (or auto) and lmikit deploy SPEC"))
        sticky = alts.get(f"sticky_session/{sim['mode']}")
        if sticky is not None and sticky - sim["total"] >= WORTH_IT:
            why.append((f"routing {sim['routing']} scatters a conversation's requests over "
                        f"{sim['copies']} copies, each computing the context again; with "
                        f"sticky sessions the simulator expects {_pct(sticky)}",
                        "set routing.strategy: sticky_session and open a session per "
                        "conversation (Endpoint.session())"))
        detail = (f"measured {_pct(got['total'])} of prompt tokens from cache (GPU "
                  f"{_pct(got['gpu'])}, LMCache {_pct(got['lmcache'])}) vs simulated "
                  f"{_pct(sim['total'])} (GPU {_pct(sim['gpu'])}, LMCache {_pct(sim['lmcache'])})")
        best = max([sim["total"], *alts.values()])
        if why and got["total"] < best - HIT_RATE_TOLERANCE:
            return [Check("cache", "fail", "the cache does not pay: " + detail + "; " + why[0][0],
                          why[0][1])] + [Check("cache", "fail", w, f) for w, f in why[1:]]
        if got["total"] < sim["total"] - HIT_RATE_TOLERANCE:
            return [Check("cache", "fail", "the cache pays less than planned: " + detail,
                          "compare the traffic with the spec's workload (lmikit simulate); "
                          "look for evictions (LMCacheCpuEvictions)")]
        return [Check("cache", "ok", detail)]

    def sessions(self) -> Check:
        if self.spec.routing.strategy != "sticky_session":
            return Check("sessions", "skip", f"routing is {self.spec.routing.strategy}: "
                         "nothing pins a conversation to one copy")
        from lmikit.aws import component_environment

        desc = self._describe("describe_inference_component", InferenceComponentName=self.base)
        if desc is None:
            return Check("sessions", "skip", f"the base component {self.base} does not exist")
        # The container's environment, or the Model's when the component names one (S3
        # weights: Specification.ModelName, no Container). LMI's vLLM async service makes its
        # session manager unless the option is set to something else (djl-serving
        # vllm_async_service.py VLLMHandler.initialize: a missing option counts as "true").
        env = component_environment(self.clients.sagemaker, desc)
        value = env.get("OPTION_ENABLE_STATEFUL_SESSIONS", "true")
        if value != "true":
            return Check("sessions", "fail", "routing is sticky_session but the deployed "
                         f"container sets OPTION_ENABLE_STATEFUL_SESSIONS={value!r}: LMI then "
                         "has no session manager and fails every request", "lmikit deploy SPEC")
        return Check("sessions", "ok", "sessions are enabled; SageMaker publishes no "
                     "per-session placement, so stickiness shows only in the hit rate above")

    def ttft(self, report: Report) -> Check:
        measured = self._stat(CLIENT_NAMESPACE, "TimeToFirstToken",
                              {"EndpointName": self.spec.name}, "Average")
        report.measured["ttft_mean_s"] = measured
        predicted = report.predicted.get("ttft_p50_s")
        if measured is None:
            return Check("ttft", "skip", "no client TTFT in the window", "publish it: "
                         "Endpoint(name, publish_metrics=True) or lmikit invoke --publish-metrics")
        if predicted is None:
            return Check("ttft", "skip", f"measured mean {measured:.3f} s; no prediction "
                         "(the spec's workload reuses no context)")
        text = f"client mean {measured:.3f} s vs simulated p50 {predicted:.3f} s"
        if measured > TTFT_FACTOR * predicted + 0.1:
            return Check("ttft", "warn", text + f" (more than {TTFT_FACTOR:g}x)",
                         "check the cache verdict and RequestsWaiting (queueing)")
        return Check("ttft", "ok", text)


def doctor(spec: DeploymentSpec, **kwargs: Any) -> Report:
    """Run every check (see :class:`Doctor` for the arguments)."""
    return Doctor(spec, **kwargs).run()
