"""The fault matrix: deploy, update, destroy and adapter registration, each run once per API
call with that call faulted (throttled, 5xx, its answer lost, its resource Failed) or with
Ctrl-C pressed (once, or twice) just as it is made, and with two runs at once.

Every run creates its execution role (``create_role``) and applies the base component's
autoscaling, dashboard and alarms, so the calls faulted include Application Auto Scaling,
CloudWatch (alarms, dashboards) and IAM as well as SageMaker and S3. The old spec scales to
zero (a scale-from-zero policy and alarm); the new one does not (they are deleted) and
scales wider (the scalable target is updated).

Every case is judged the same way: after the run (and its settling) the deployment is in
the old state or the new one (which one, printed), or in a partial state that the error
explains; the state includes the scalable target, scaling policies, alarms with their tags,
the dashboard's body and the role with its policy, read straight from moto; nothing of the
deployment is orphaned (an endpoint config, Model, S3 artifact or lease nothing uses, or,
once the endpoint is gone, a scalable target, policy, alarm, dashboard or role); no live
resource lost what it uses (its config, Model or artifact); no exception other than an lmikit
error escaped; and running the operation again without faults converges on the new state.

Used by tests/functional/test_fault_matrix.py (a bounded subset) and
benchmarks/fault_matrix.py (everything).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import inspect
import json
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

import lmikit.deploy
from lmikit.deploy import Deployment
from lmikit.errors import LmikitError
from lmikit.lora import AdapterRegistry
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, Timings, VirtualClock, s3_artifact_exists
from lmikit.testing._adapters import write_lora_adapter
from tests.functional._account import extras

NAME = "docqa"
REGION = "us-east-1"
BUCKET = "lmikit-matrix"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi20.0.0-cu128"
BASE = """api_version: v1
name: docqa
region: us-east-1
model: {id: Qwen/Qwen2.5-7B-Instruct}
instance: {type: ml.g6e.2xlarge%s}
kv_cache: {mode: cpu}
workload: {reused_context_tokens: 460000}
routing: {strategy: sticky_session}
"""
# The old spec: base and two adapters. The new one changes the endpoint config (max_count),
# the base's environment (max_batch_size), one adapter's weights, removes one adapter and
# adds another.
SPEC_OLD = BASE % ", min_count: 0" + """adapters:
  - {name: legal, source: adapters/legal}
  - {name: medical, source: adapters/medical}
"""
SPEC_NEW = BASE % ", max_count: 2" + """engine: {max_batch_size: 16}
adapters:
  - {name: legal, source: adapters/legal-v2}
  - {name: tax, source: adapters/tax}
"""
SCENARIOS = ("deploy", "update", "destroy", "register")
FAULTS = ("throttle", "5xx", "lost", "failed", "ctrl-c", "ctrl-c-twice")
_NAME_KEYS = ("InferenceComponentName", "EndpointConfigName", "EndpointName", "ModelName")
_STATUS_OPS = {"CreateEndpoint", "UpdateEndpoint", "CreateInferenceComponent",
               "UpdateInferenceComponent", "UpdateInferenceComponentRuntimeConfig"}
_REFUSED_OPS = {"CreateEndpointConfig", "CreateModel"}  # "failed" = the service refuses
# benchmarks/fault_matrix.py --baseline runs these cases against an older lmikit, whose
# deployer has no Interrupts: Ctrl-C is then a KeyboardInterrupt raised in the call.
HAS_INTERRUPTS = "interrupts" in inspect.signature(Deployment).parameters


class _Presses:
    def __init__(self) -> None:
        self.presses = 0

    def press(self) -> int:
        self.presses += 1
        return self.presses


def _interrupts() -> Any:
    return lmikit.deploy.Interrupts() if HAS_INTERRUPTS else _Presses()  # type: ignore


def _adapter(root: Path, name: str, fill: int) -> None:
    write_lora_adapter(root / "adapters" / name, fill=fill)


_LOADER: Any = None


def _session() -> boto3.Session:
    """A fresh session (its own event handlers) sharing one loader: service models are
    parsed once per process, not once per case."""
    global _LOADER
    import botocore.loaders
    import botocore.session

    if _LOADER is None:
        _LOADER = botocore.loaders.create_loader()
    core = botocore.session.get_session()
    core.register_component("data_loader", _LOADER)
    return boto3.Session(botocore_session=core, region_name=REGION)


@contextlib.contextmanager
def no_backoff() -> Iterator[None]:
    """botocore still retries, without sleeping in real time between attempts."""
    from botocore.retries import standard

    original = standard.ExponentialBackoff.delay_amount
    standard.ExponentialBackoff.delay_amount = lambda self, context: 0.0  # type: ignore
    try:
        yield
    finally:
        standard.ExponentialBackoff.delay_amount = original  # type: ignore[method-assign]


class World:
    """One account: moto for S3/CloudWatch, the fake SageMaker, a virtual clock."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="lmikit-matrix-"))
        for fill, name in enumerate(("legal", "medical", "legal-v2", "tax", "extra"), 1):
            _adapter(self.tmp, name, fill)
        self._mock = mock_aws()
        self._mock.start()
        self.s3 = _session().client("s3")
        self.s3.create_bucket(Bucket=BUCKET)
        self.clock = VirtualClock()
        self.fake = FakeSageMaker(REGION, clock=self.clock, timings=Timings(),
                                  artifact_exists=s3_artifact_exists(self.s3))
        self.session = self.fake.install(_session())
        self.interrupts = _interrupts()

    def close(self) -> None:
        self._mock.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spec(self, text: str) -> DeploymentSpec:
        return load_spec_text(text, source=str(self.tmp / "spec.yaml"))

    def deployment(self, text: str, **kwargs: Any) -> Deployment:
        if HAS_INTERRUPTS:
            kwargs.setdefault("interrupts", self.interrupts)
        if "create_role" in inspect.signature(Deployment).parameters:
            kwargs.setdefault("create_role", True)
        else:  # an older deployer (--baseline): no role step
            kwargs.setdefault("role_arn", "arn:aws:iam::123456789012:role/lmikit-test")
        return Deployment(self.spec(text), session=self.session, bucket=BUCKET,
                          base_dir=self.tmp, image_uri=IMAGE, clock=self.clock,
                          poll_seconds=10, retry_mode="standard", **kwargs)

    def registry(self) -> AdapterRegistry:
        return AdapterRegistry(NAME, session=self.session, bucket=BUCKET, clock=self.clock,
                               poll_seconds=1, retry_mode="standard")

    # --- the scenario's operations -----------------------------------------------------

    def setup(self, scenario: str) -> None:
        if scenario in ("update", "register"):
            self.deployment(SPEC_OLD).deploy()
        elif scenario == "destroy":
            self.deployment(SPEC_NEW).deploy()
        self.fake.settle()

    def action(self, scenario: str) -> Any:
        if scenario == "deploy":
            return self.deployment(SPEC_OLD).deploy()
        if scenario == "update":
            return self.deployment(SPEC_NEW).deploy()
        if scenario == "destroy":
            return self.deployment(SPEC_NEW).destroy()
        return self.registry().register("extra", self.tmp / "adapters" / "extra", wait=True)

    # --- what the account holds --------------------------------------------------------

    def extras(self) -> dict[str, Any]:
        """The deployment's scaling, alarms, dashboard and role, as moto holds them."""
        return extras(lambda service: _session().client(service), NAME)

    def state(self) -> dict[str, Any]:
        """The deployment as SageMaker runs it (settled): endpoint and components; and its
        scaling, alarms, dashboard and role."""
        self.fake.settle()
        plane = self.fake.control
        endpoint = plane.endpoints.get(NAME)
        return {
            "extras": self.extras(),
            "endpoint": None if endpoint is None else
            (endpoint.status, endpoint.request["EndpointConfigName"]),
            "components": {n: (c.status, json.dumps(c.request["Specification"],
                                                    sort_keys=True),
                               (c.request.get("RuntimeConfig") or {}).get("CopyCount"))
                           for n, c in sorted(plane.components.items())},
        }

    def _objects(self) -> list[str]:
        rows = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"lmikit/{NAME}/")
        return sorted(r["Key"] for r in rows.get("Contents", []))

    def orphans(self) -> list[str]:
        """The deployment's things nothing live uses."""
        self.fake.settle()
        plane = self.fake.control
        used_configs = {e.request["EndpointConfigName"] for e in plane.endpoints.values()}
        specs = [c.request["Specification"] for c in plane.components.values()]
        used_models = {s.get("ModelName") for s in specs}
        used_urls = {s.get("Container", {}).get("ArtifactUrl") for s in specs}
        out = [f"endpoint-config {c}" for c in plane.configs if c not in used_configs]
        out += [f"model {m}" for m in plane.models if m not in used_models]
        for key in self._objects():
            if key.endswith("lease.json"):
                out.append(f"lease s3://{BUCKET}/{key}")
            elif f"s3://{BUCKET}/{key}" not in used_urls:
                out.append(f"artifact s3://{BUCKET}/{key}")
        if not plane.endpoints:
            out += [f"{kind} {name}" for kind, found in self.extras().items()
                    for name in found]
        return out

    def lost(self) -> list[str]:
        """Live resources whose config, Model or artifact is gone."""
        self.fake.settle()
        plane = self.fake.control
        keys = set(self._objects())
        out = [f"endpoint {n} lost config {e.request['EndpointConfigName']}"
               for n, e in plane.endpoints.items()
               if e.request["EndpointConfigName"] not in plane.configs]
        for n, c in plane.components.items():
            spec = c.request["Specification"]
            url = spec.get("Container", {}).get("ArtifactUrl")
            if url and url.split("/", 3)[3] not in keys:
                out.append(f"inference-component {n} lost artifact {url}")
            if spec.get("ModelName") and spec["ModelName"] not in plane.models:
                out.append(f"inference-component {n} lost model {spec['ModelName']}")
        return out


@dataclass(frozen=True)
class Target:
    """One call of a scenario: ``skip`` earlier calls of it match the same operation+name."""

    service: str
    operation: str
    name: str | None
    skip: int = 0

    @property
    def label(self) -> str:
        return f"{self.operation}({self.name or ''})#{self.skip}"


@dataclass(frozen=True)
class Case:
    scenario: str
    fault: str  # one of FAULTS, or "concurrent"
    target: Target | None = None

    @property
    def label(self) -> str:
        return f"{self.scenario}/{self.fault}/" + (self.target.label if self.target else "")


@dataclass
class Outcome:
    case: Case
    final: str  # "old" | "new" | "partial" (explained) | "neither"
    fired: bool  # the fault (or Ctrl-C) actually happened
    orphans: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    traceback: str | None = None
    converged: bool = True
    message: str = ""

    @property
    def survived(self) -> bool:
        return (self.final in ("old", "new", "partial") and not self.orphans and not self.lost
                and self.traceback is None and self.converged)


def _call_name(call: Any) -> str | None:
    if call.service == "sagemaker":
        for key in _NAME_KEYS:
            if call.params.get(key):
                return str(call.params[key])
        return None
    url = str(call.params.get("url", ""))
    path = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
    return path or None


def _matches(call: Any, operation: str, name: str | None) -> bool:
    if call.operation != operation:
        return False
    if name is None:
        return True
    params = call.params
    return any(name in str(params.get(k, "")) for k in (*_NAME_KEYS, "url"))


def reference(scenario: str) -> tuple[dict[str, Any], dict[str, Any], list[Target]]:
    """Old state, new state and every call of a fault-free run of ``scenario``."""
    world = World()
    try:
        with no_backoff():
            world.setup(scenario)
            old = world.state()
            mark = len(world.fake.calls)
            world.action(scenario)
            new = world.state()
        calls = [c for c in world.fake.calls[mark:] if c.service in (
            "sagemaker", "s3", "cloudwatch", "application-auto-scaling", "iam")]
    finally:
        world.close()
    targets: list[Target] = []
    seen: set[tuple[str, str | None]] = set()
    for i, call in enumerate(calls):
        name = _call_name(call)
        mutating = not call.operation.startswith(("Describe", "List", "Get", "Head"))
        if (call.operation, name) in seen and not mutating:
            continue  # a repeated read (a poll): its first occurrence stands for it
        seen.add((call.operation, name))
        skip = sum(1 for c in calls[:i] if _matches(c, call.operation, name))
        targets.append(Target(call.service, call.operation, name, skip))
    return old, new, targets


def cases(scenario: str, targets: list[Target]) -> list[Case]:
    out = []
    for t in targets:
        mutating = not t.operation.startswith(("Describe", "List", "Get", "Head"))
        for fault in FAULTS:
            if fault == "failed" and t.operation not in _STATUS_OPS | _REFUSED_OPS:
                continue
            if fault in ("throttle", "5xx") and t.service == "cloudwatch" \
                    and fault == "throttle":
                continue
            if fault.startswith("ctrl-c") and not mutating:
                continue
            if fault == "ctrl-c-twice" and scenario == "register":
                continue  # the registry has one stage: Ctrl-C undoes what it made
            out.append(Case(scenario, fault, t))
    return out


def _arm(world: World, case: Case) -> Callable[[], bool]:
    """Inject the case's fault; returns a function telling whether it fired."""
    t = case.target
    if t is None:
        return lambda: True
    if case.fault in ("throttle", "5xx", "lost", "failed"):
        kind = "limit" if case.fault == "failed" and t.operation in _REFUSED_OPS else \
            case.fault
        fault = world.fake.inject(t.operation, kind, name=t.name, skip=t.skip,
                                  reason="injected by the fault matrix")
        return lambda: fault.hits > 0
    presses = 1 if case.fault == "ctrl-c" else 2
    state = {"seen": 0, "fired": False}

    def before_call(model: Any, params: dict[str, Any], **_: Any) -> None:
        if state["fired"] or model.name != t.operation:
            return
        probe = type("C", (), {"operation": model.name, "params": params,
                               "service": t.service})
        if t.service != "sagemaker":
            probe.params = {"url": f"/{params.get('Bucket', '')}/{params.get('Key', '')}"}
        if not _matches(probe, t.operation, t.name):
            return
        if state["seen"] < t.skip:
            state["seen"] += 1
            return
        state["fired"] = True
        if not HAS_INTERRUPTS or case.scenario == "register":
            raise KeyboardInterrupt  # the signal's exception, raised where the call is
        for _ in range(presses):
            world.interrupts.press()

    world.session.events.register("before-parameter-build", before_call)
    return lambda: bool(state["fired"])


def run_case(case: Case, old: dict[str, Any], new: dict[str, Any]) -> Outcome:
    world = World()
    try:
        with no_backoff():
            world.setup(case.scenario)
            if case.fault == "concurrent":
                return _concurrent(world, case, old, new)
            fired = _arm(world, case)
            error: BaseException | None = None
            tb = None
            notes: list[str] = []
            try:
                result = world.action(case.scenario)
                notes = list(getattr(result, "notes", []))
            except LmikitError as exc:
                error = exc
            except BaseException as exc:  # noqa: BLE001 - a traceback is what we count
                error = exc
                tb = "".join(traceback.format_exception(exc))
            outcome = _judge(world, case, old, new, error, fired(), tb, notes)
            _converge(world, case, new, outcome)
            return outcome
    finally:
        world.close()


def _judge(world: World, case: Case, old: dict[str, Any], new: dict[str, Any],
           error: BaseException | None, fired: bool, tb: str | None,
           notes: list[str]) -> Outcome:
    state = world.state()
    final = "old" if state == old else "new" if state == new else "neither"
    message = str(error) if error else ""
    claimed = getattr(error, "state", None)
    if error is not None and tb is None and (claimed == "partial"
                                             or "left behind:" in message):
        final = "partial"  # a state the error explains (what is left, how to finish)
    if claimed == "old" and final != "old":
        final = "neither"  # the error said "as it was" and it is not
    if error is None and final != "new":
        final = "neither"  # success must mean the new state
    if error is None and final == "new" and any("`lmikit gc" in n for n in notes):
        final = "partial"  # finished; the clean-up left to do is named
        message = "\n".join(notes)
    if "nothing is left behind" in message and (final != "old" or world.orphans()):
        final = "neither"
    outcome = Outcome(case, final, fired, traceback=tb, message=message)
    if final in ("old", "new"):
        outcome.orphans = world.orphans()
    outcome.lost = world.lost()
    return outcome


def _converge(world: World, case: Case, new: dict[str, Any], outcome: Outcome) -> None:
    """Run the operation again without faults: it must reach the new state, and leave no
    orphans behind."""
    world.fake.clear_faults()
    world.interrupts = _interrupts()
    try:
        world.action(case.scenario)
        if case.scenario in ("deploy", "update"):  # and once more: nothing left to do
            again = world.action(case.scenario)
            if again.changed:
                outcome.converged = False
    except LmikitError as exc:
        outcome.converged = False
        outcome.message += f"\n(re-run failed: {exc})"
        return
    if world.state() != new:
        outcome.converged = False
    if outcome.final == "partial":
        outcome.orphans = world.orphans()
    outcome.lost += [x for x in world.lost() if x not in outcome.lost]


def _concurrent(world: World, case: Case, old: dict[str, Any], new: dict[str, Any]
                ) -> Outcome:
    """Two runs of the scenario's operation at once: one may be refused (the lease), none
    may break the other."""
    worlds_action = world.action
    with cf.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(worlds_action, case.scenario) for _ in range(2)]
        results = []
        for fut in futures:
            try:
                fut.result()
                results.append("ok")
            except LmikitError as exc:
                results.append(f"{exc.kind}: {exc}")
            except BaseException as exc:  # noqa: BLE001
                return Outcome(case, "neither", True,
                               traceback="".join(traceback.format_exception(exc)))
    state = world.state()
    ok = "ok" in results and all(r == "ok" or r.startswith("LeaseHeld:") for r in results)
    final = "new" if state == new and ok else "neither"
    return Outcome(case, final, True, orphans=world.orphans(), lost=world.lost(),
                   message=" | ".join(results))


def concurrent_cases() -> list[Case]:
    return [Case(s, "concurrent") for s in SCENARIOS]
