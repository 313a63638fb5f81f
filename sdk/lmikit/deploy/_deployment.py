"""Create, update, inspect and delete one deployment with boto3, converging on the spec.

A deploy takes the deployment's lease, creates or updates the execution role
(``create_role``), reads what exists, plans the steps between that and the spec
(``plan_changes()`` prints the same plan without changing anything), carries them out, then
applies the base component's autoscaling and the dashboard and alarms. If a step fails, or
Ctrl-C is pressed, every step is undone newest first and the error says whether the account
is exactly as it was (``state="old"``) or what is left. After a successful deploy,
:meth:`Deployment.gc` removes the configs, Models and artifacts nothing uses any more.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit.aws import (
    ArtifactStore,
    Clients,
    Clock,
    Lease,
    ProgressFn,
    RealClock,
    Stopped,
    as_source,
    check_bucket_name,
    default_bucket,
    describe,
    no_progress,
    owner_of,
    package_source,
    tags_of,
)
from lmikit.aws._lease import LEASE_SECONDS
from lmikit.catalog import ImageKind, image_kind_of
from lmikit.deploy import _builtin, _destroy
from lmikit.deploy._apply import Applier, change_list
from lmikit.deploy._gc import Collection, Usage, collect, garbage, replaced_by
from lmikit.deploy._hooks import Hook, StepContext
from lmikit.deploy._interrupt import Interrupts, StopRequested
from lmikit.deploy._plan import (
    PRUNE_OR_KEEP,
    Desired,
    PendingArtifact,
    kept_artifacts,
    observe,
    plan_steps,
)
from lmikit.deploy._result import Change, DeployResult, ResourceState
from lmikit.deploy._rollback import roll_back
from lmikit.deploy._run import Run, Undo
from lmikit.errors import DeployError, DeployFailed, Interrupted, LmikitError
from lmikit.names import BUCKET_TAG, artifact_prefix, base_component_name
from lmikit.spec import DeploymentSpec

if TYPE_CHECKING:
    from lmikit.resolve import Resolved


class Deployment:
    """One spec's resources on SageMaker.

    >>> d = Deployment(spec, role_arn=role, bucket="my-bucket")  # doctest: +SKIP
    >>> d.plan_changes()  # doctest: +SKIP
    [Change(kind='artifact', ...), Change(kind='endpoint', name='docqa', action='create'), ...]
    >>> d.deploy().summary()  # doctest: +SKIP
    'upload artifact s3://...; create endpoint-config docqa-1a2b...; create endpoint docqa; ...'

    ``session`` is a boto3 session (one is created for ``spec.region`` if omitted);
    ``clock`` and ``poll_seconds`` control waiting (tests pass the fake's clock);
    ``retry_mode`` is botocore's (adaptive by default: it also slows down after throttling).
    ``bucket`` defaults to the one the deployed endpoint names (tag ``lmikit:bucket``), else
    ``sagemaker-<region>-<account>``. Adapter components the spec does not list: one
    registered with ``lmikit adapters`` (tag ``lmikit:managed-by=adapters``) is kept, one the
    spec listed before is removed; ``keep_unlisted_adapters`` keeps both, ``prune`` removes
    both. ``force_unlock`` takes the
    deployment's lease even when another run holds it. ``create_role`` (when ``role_arn`` is
    not given) creates or updates the least-privilege role ``lmikit-<name>-execution`` first
    (:func:`lmikit.deploy.apply_execution_role`); with neither, the role of the config the
    deployed endpoint runs is used (a first deploy needs one of them). ``autoscaling`` and
    ``observability`` (both on, as in the CDK stack) apply the base component's copy-count
    scaling and the dashboard and default alarms once every component is InService.
    ``post_deploy_steps`` and ``pre_destroy_steps`` are extra steps (see
    :mod:`lmikit.deploy._hooks`).
    """

    def __init__(self, spec: DeploymentSpec, *, session: Any = None,
                 role_arn: str | None = None, bucket: str | None = None,
                 base_dir: str | Path = ".", image_uri: str | None = None,
                 plan: Any = None, clock: Clock | None = None,
                 progress: ProgressFn = no_progress, poll_seconds: float = 15.0,
                 timeout_seconds: float = 3600.0, max_workers: int = 16,
                 retry_mode: str = "adaptive", image_kind: ImageKind | None = None,
                 keep_unlisted_adapters: bool = False, prune: bool = False,
                 force_unlock: bool = False,
                 interrupts: Interrupts | None = None, lease_seconds: float = LEASE_SECONDS,
                 on_plan: Callable[[list[Change]], None] | None = None,
                 spec_path: str | None = None, create_role: bool = False,
                 autoscaling: bool = True, observability: bool = True) -> None:
        if bucket is not None:
            check_bucket_name(bucket)  # before anything is created
        if keep_unlisted_adapters and prune:
            raise DeployError(PRUNE_OR_KEEP)
        self.spec = spec
        self.clients = Clients(session, spec.region, retry_mode)
        self.role_arn = role_arn
        self._bucket = bucket
        self.base_dir = Path(base_dir)
        self._image_uri = image_uri
        self.image_kind: ImageKind = image_kind or (
            image_kind_of(image_uri) if image_uri else "stock")
        self._plan = plan
        self._resolved: tuple[DeploymentSpec, Any, ImageKind, Resolved] | None = None
        self.clock: Clock = clock or RealClock()
        self.progress = progress
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.max_workers = max_workers
        self.keep_unlisted_adapters = keep_unlisted_adapters
        self.prune = prune
        self.force_unlock = force_unlock
        self.interrupts = interrupts or Interrupts()
        self.lease_seconds = lease_seconds
        self.on_plan = on_plan
        self.spec_path = spec_path or "SPEC"
        self.post_deploy_steps: list[Hook] = []
        self.pre_destroy_steps: list[Hook] = []
        self.create_role = create_role and role_arn is None
        self.autoscaling = autoscaling
        self.observability = observability

    # --- inputs ----------------------------------------------------------------------

    @property
    def plan(self) -> Any:
        if self._plan is None:
            from lmikit.planner import plan_spec

            self._plan = plan_spec(self.spec, base_dir=self.base_dir)
        return self._plan

    @property
    def resolved(self) -> Resolved:
        """Every decision the renderers derive from (spec, plan, image kind), made once (again
        only when one of the three is replaced)."""
        cached = self._resolved
        if not (cached and cached[0] is self.spec and cached[1] is self.plan
                and cached[2] == self.image_kind):
            from lmikit.resolve import resolve_spec

            made = resolve_spec(self.spec, self.plan, image_kind=self.image_kind)
            cached = self._resolved = (self.spec, self.plan, self.image_kind, made)
        return cached[3]

    @property
    def image_uri(self) -> str:
        if self._image_uri is None:
            from lmikit.catalog import lmi_image_uri

            self._image_uri = lmi_image_uri(self.spec.region, self.spec.engine.lmi_version)
        return self._image_uri

    @property
    def bucket(self) -> str:
        """``bucket=``, else the bucket the deployed endpoint names, else SageMaker's default."""
        if self._bucket is None:
            self._bucket = self.recorded_bucket() or default_bucket(self.clients)
        return self._bucket

    def recorded_bucket(self) -> str | None:
        """The bucket the deployed endpoint names in its ``lmikit:bucket`` tag, if any."""
        desc = describe(self.clients.sagemaker, "endpoint", self.spec.name)
        if desc is None:
            return None
        tags = tags_of(self.clients.sagemaker, desc["EndpointArn"])
        return tags.get(BUCKET_TAG) if owner_of(tags) == self.spec.name else None

    def deployed_role(self) -> str | None:
        """The execution role of the config the deployed endpoint runs, when the endpoint is
        this deployment's: a later deploy, dry run or doctor needs no ``role_arn`` again."""
        desc = describe(self.clients.sagemaker, "endpoint", self.spec.name)
        if desc is None:
            return None
        if owner_of(tags_of(self.clients.sagemaker, desc["EndpointArn"])) != self.spec.name:
            return None
        config = describe(self.clients.sagemaker, "endpoint-config",
                          desc["EndpointConfigName"])
        role = (config or {}).get("ExecutionRoleArn")
        return str(role) if role else None

    @property
    def base_name(self) -> str:
        return base_component_name(self.spec.name)

    def store(self) -> ArtifactStore:
        return ArtifactStore(self.clients.s3, self.bucket, deployment=self.spec.name,
                             region=self.spec.region,
                             kms_key_arn=self.spec.security.kms_key_arn)

    def desired(self) -> Desired:
        """Package every artifact (content-addressed, nothing uploaded) and render every
        request."""
        from lmikit.lora import package_spec_adapter
        from lmikit.render import model_artifact, render_requests

        if not self.role_arn and self.create_role:
            from lmikit.deploy._role import role_arn_of

            self.role_arn = role_arn_of(self.spec, self.clients)  # known before it exists
        if not self.role_arn:
            self.role_arn = self.deployed_role()
        if not self.role_arn:
            raise DeployError(f"an execution role is needed: {self.spec.name!r} is not "
                              f"deployed in {self.spec.region} yet, so there is no role to "
                              "reuse; pass role_arn= (CLI: --role-arn) or create_role=True "
                              "(CLI: --create-role)")
        resolved = self.resolved
        self.check_staged_weights()
        store = self.store()
        artifacts: list[PendingArtifact] = []
        model_url = None
        data = model_artifact(self.spec, self.plan, self.base_dir, image=self.image_kind,
                              resolved=resolved)
        if data is not None:
            source = as_source(data)
            root = artifact_prefix(self.spec.name)
            model_url = store.url(root, source.sha256)
            artifacts.append(PendingArtifact(root, source, model_url, "model"))
        adapter_urls: dict[str, str] = {}
        for a in self.spec.adapters:
            if a.source.startswith("s3://"):
                adapter_urls[a.name] = a.source
                continue
            package = package_spec_adapter(self.spec, self.plan, a, self.base_dir)
            source = package_source(package)
            prefix = artifact_prefix(self.spec.name, a.name)
            adapter_urls[a.name] = store.url(prefix, source.sha256)
            artifacts.append(PendingArtifact(prefix, source, adapter_urls[a.name],
                                             f"adapter {a.name}"))
        requests = render_requests(self.spec, self.plan, image_uri=self.image_uri,
                                   execution_role_arn=self.role_arn,
                                   model_artifact_url=model_url,
                                   adapter_artifact_urls=adapter_urls,
                                   image_kind=self.image_kind, resolved=resolved)
        alarm = _builtin.rollback_alarm_name(self.spec.name) \
            if self.spec.observability.alarms.enabled else None
        return Desired(requests, tuple(artifacts), self.bucket, alarm,
                       scaled=self.autoscaling)

    def new_run(self) -> Run:
        return Run(clients=self.clients, clock=self.clock, progress=self.progress,
                   interrupts=self.interrupts, poll_seconds=self.poll_seconds,
                   timeout_seconds=self.timeout_seconds, max_workers=self.max_workers)

    def lease(self, operation: str) -> Lease:
        return Lease(self.clients.s3, self.bucket, self.spec.name, clock=self.clock,
                     operation=operation, seconds=self.lease_seconds)

    # --- plan and deploy -------------------------------------------------------------

    def plan_changes(self, *, wait: bool = True) -> list[Change]:
        """What :meth:`deploy` would do, per resource, without changing anything (no
        upload, no bucket, no lease: read calls only): the role (with ``create_role``), the
        SageMaker resources and artifacts, the scaling, the dashboard and alarms, then what
        garbage collection would delete. An entry that is ``changed`` is a real
        difference between the account and the spec.

        A resource that is Creating, Updating or Deleting is waited out first, as a deploy
        would; with ``wait=False`` it raises :class:`~lmikit.errors.WaitTimeout` at once
        instead, naming it and its status."""
        desired = self.desired()
        run = self.new_run()
        if not wait:
            run.waiter.timeout_seconds = 0
        role = _builtin.plan_role(self) if self.create_role else []
        seen = observe(run.sm, run.waiter, self.store(), desired, self.spec.name,
                       self.clients.cloudwatch, self._autoscaling_client())
        steps = plan_steps(desired, seen, keep_unlisted=self.keep_unlisted_adapters,
                           prune=self.prune)
        names = desired.requests.names
        after = Usage(configs={names.endpoint_config},
                      models={names.model} if names.model else set(),
                      urls={a.url for a in desired.artifacts} | kept_artifacts(steps))
        extras = _builtin.plan_extras(self, autoscaling=self.autoscaling,
                                      observability=self.observability)
        return role + change_list(steps) + extras + garbage(run, self.store(),
                                                             self.spec.name, after)

    def _autoscaling_client(self) -> Any:
        return self.clients.autoscaling if self.autoscaling else None

    def deploy(self) -> DeployResult:
        """Converge on the spec; on failure undo this run and raise DeployFailed (or
        Interrupted) saying whether the account is as it was (``state``)."""
        desired = self.desired()
        if self.create_role:  # refuse a role that is not ours before anything changes
            _builtin.plan_role(self)
        store = self.store()
        run = self.new_run()
        store.ensure_bucket()
        lease = self.lease("deploy")
        lease.acquire(force=self.force_unlock)
        run.keep_alive = lease.keep_alive
        if lease.broken is not None:
            run.result.notes.append(f"Took over the lease of {lease.broken.describe()}.")
        try:
            try:
                if self.create_role:  # before any SageMaker resource names it
                    _builtin.role_step(self, run)
                seen = observe(run.sm, run.waiter, store, desired, self.spec.name,
                               self.clients.cloudwatch, self._autoscaling_client())
                steps = plan_steps(desired, seen, keep_unlisted=self.keep_unlisted_adapters,
                                   prune=self.prune)
                if self.on_plan is not None:  # the whole run: role, SageMaker, extras
                    self.on_plan(list(run.result.changes) + change_list(steps)
                                 + _builtin.plan_extras(self, autoscaling=self.autoscaling,
                                                        observability=self.observability))
                Applier(run, store, desired, self.spec.name).apply(steps)
                if self.autoscaling:  # every component is InService now
                    _builtin.scaling_step(self, run)
                if self.observability:
                    _builtin.observability_step(self, run)
                self.run_steps(self.post_deploy_steps, run)
            except (LmikitError, StopRequested, KeyboardInterrupt) as exc:
                raise self.failure(run, exc, "deploy") from exc
            run.committed = True
            self.collect_after(run, store, replaced_by(steps))
            return run.result
        finally:
            self.release(lease, run)

    def run_steps(self, steps: list[Hook], run: Run) -> None:
        """Run hook steps in order; their undos join the run's journal."""
        for step in steps:
            run.checkpoint()
            ctx = StepContext(self.spec, self.plan, self.clients, self.bucket, self.progress)
            try:
                for change in step(ctx) or ():
                    run.record(change)
            finally:
                for description, undo in ctx.undo:
                    run.undo(Undo(description, _returning(description, undo)))

    def collect_after(self, run: Run, store: ArtifactStore,
                      replaced: list[str] | None = None) -> None:
        """Garbage collection after a successful deploy: what it cannot delete (a delete
        that fails, a second Ctrl-C) is a note naming each one, not an error; the next
        deploy or gc deletes it. ``replaced``: what this deploy stopped using."""
        if self.interrupts.stop_requested:
            run.result.notes.append("Interrupted after every change was applied: the "
                                    "deployment is on the new spec.")
        later = (f"The next `lmikit deploy {self.spec_path}` or `lmikit gc {self.spec_path}` "
                 "deletes them.")
        if self.interrupts.abandon:
            run.result.notes.append("Garbage collection was skipped (a second Ctrl-C)"
                                    + (f"; it left {', '.join(replaced)}. {later}" if replaced
                                       else f"; run `lmikit gc {self.spec_path}` to delete "
                                       "what nothing uses."))
            return
        try:  # reading what is unused can fail too: the deploy still succeeded
            done = collect(run, store, self.spec.name, self.spec_path,
                           finish_after_first_press=True, replaced=replaced)
        except (LmikitError, KeyboardInterrupt) as exc:
            if isinstance(exc, KeyboardInterrupt) and not self.interrupts.handler_installed:
                self.interrupts.press()
            done = Collection(left=list(replaced or ()), stopped=str(exc) or "Ctrl-C")
        for change in done.deleted:
            run.record(change)
        if done.stopped and not done.left:  # it could not even read what is unused
            run.result.notes.append(f"The deployment is on the new spec, but garbage "
                                    f"collection stopped ({done.stopped}); run "
                                    f"`lmikit gc {self.spec_path}` to finish it.")
        elif done.left and not done.busy:  # (when busy, collect's note names them)
            why = f"stopped ({done.stopped}) and " if done.stopped else ""
            run.result.notes.append(f"The deployment is on the new spec, but garbage "
                                    f"collection {why}left {done.left_line()}. {later}")

    def release(self, lease: Lease, run: Run) -> None:
        try:
            lease.release()
        except LmikitError as exc:
            run.result.notes.append(f"Could not release the lease ({exc}); the next run "
                                    "takes it over once it expires, or with --force-unlock.")

    def failure(self, run: Run, exc: BaseException, command: str) -> DeployFailed:
        """Roll the run back and describe where that leaves the account."""
        if isinstance(exc, KeyboardInterrupt) and not self.interrupts.handler_installed:
            self.interrupts.press()
        if self.interrupts.abandon or isinstance(exc, Stopped):
            return self.abandoned(run, command, [])
        stopped = self.interrupts.stop_requested
        cause = "interrupted by the user (Ctrl-C)" if stopped else str(exc)
        done, left = roll_back(run)
        if self.interrupts.abandon:
            return self.abandoned(run, command, done)
        lines = [f"{command} of {self.spec.name!r} failed: {cause}"]
        if done:
            lines.append("Rolled back: " + ", ".join(done) + ".")
        cls = Interrupted if stopped else DeployFailed
        if not left:
            lines.append("The deployment is as it was before this run: nothing this run "
                         "created or changed is left behind.")
            return cls("\n".join(lines), state="old")
        lines.append("Could not roll back: " + "; ".join(left) + ".")
        lines.append(f"Run `lmikit deploy {self.spec_path}` again to converge on the spec "
                     f"(or `lmikit destroy {self.spec_path}`).")
        return cls("\n".join(lines), state="partial", left=tuple(left))

    def abandoned(self, run: Run, command: str, done: list[str]) -> Interrupted:
        flying = [f"{what} ({doing})" for what, doing in sorted(run.in_flight.items())]
        pending = [u.left for u in reversed(run.journal)]
        lines = [f"{command} of {self.spec.name!r} stopped by a second Ctrl-C."]
        if done:
            lines.append("Rolled back before that: " + ", ".join(done) + ".")
        lines.append("Still in progress on AWS: " + (", ".join(flying) if flying else
                                                      "nothing") + ".")
        if pending:
            lines.append("Changed by this run and not rolled back: " + "; ".join(pending)
                         + ".")
        lines.append("Nothing that the endpoint or a component uses was deleted. Run "
                     f"`lmikit {command} {self.spec_path}` again to converge (it waits for "
                     "what is in progress), or `lmikit destroy` to remove the deployment.")
        return Interrupted("\n".join(lines), state="partial", left=tuple(flying + pending))

    # --- destroy, gc, status -------------------------------------------------------------

    def destroy(self, *, keep_artifacts: bool = False) -> DeployResult:
        """Delete every resource of the deployment that is tagged as its own: the base
        component's scaling (target, policies, scale-from-zero alarm), adapters, base
        components, the endpoint, its configs and Models, the dashboard and alarms, the
        rollback alarm, the execution role ``lmikit-<name>-execution`` and (unless
        ``keep_artifacts``) its S3 artifacts. Resources of other deployments (``docqa-v2``
        for ``docqa``) are never touched."""
        return _destroy.destroy(self, keep_artifacts=keep_artifacts)

    def garbage(self) -> list[Change]:
        """What :meth:`gc` would delete now, without deleting anything."""
        return garbage(self.new_run(), self.store(), self.spec.name)

    def gc(self) -> DeployResult:
        """Delete the deployment's configs, Models and S3 artifacts nothing uses any more
        (only when nothing is mid-update)."""
        store = self.store()
        run = self.new_run()
        result = DeployResult()
        if not store.bucket_exists():
            lease = None
        else:
            lease = self.lease("gc")
            lease.acquire(force=self.force_unlock)
            run.keep_alive = lease.keep_alive
        try:
            done = collect(run, store, self.spec.name, self.spec_path)
        finally:
            if lease is not None:
                self.release(lease, run)
        result.changes = done.deleted
        result.notes += run.result.notes
        if done.left and not done.busy:  # (when busy, collect's note says to run it later)
            deleted = ", ".join(f"{c.kind} {c.name}" for c in done.deleted)
            raise DeployFailed(
                f"gc of {self.spec.name!r} "
                + (f"stopped ({done.stopped}) and " if done.stopped else "")
                + f"left {done.left_line()}."
                + (f" Deleted: {deleted} (nothing used them)." if deleted else "")
                + f" Run `lmikit gc {self.spec_path}` again to finish.",
                state="partial", left=tuple(done.left))
        return result

    def check_staged_weights(self) -> None:
        """Read only, before anything is created: weights named by ``model.hub_id`` are a
        finished ``lmikit weights stage`` copy of that model (its manifest is written last, so
        a copy that stopped part-way is never deployed), and the isolating ``model.py`` is in
        the prefix where LoRA with LMCache needs it."""
        from lmikit.render import weights_model_py
        from lmikit.weights import WeightsError, check_model_py, check_staged

        model = self.spec.model
        try:
            if model.is_s3 and model.hub_id:
                check_staged(model.id, model_id=model.hub_id, region=self.spec.region,
                             s3=self.clients.s3)
            expected = weights_model_py(self.spec, self.plan, resolved=self.resolved)
            if expected is not None:
                check_model_py(model.id, expected, s3=self.clients.s3)
        except WeightsError as exc:
            raise DeployError(f"model.id: {exc}") from None

    def status(self) -> list[ResourceState]:
        """Every resource of the deployment with its current state."""
        return _destroy.status(self)


def _returning(description: str, undo: Callable[[], None]) -> Callable[[], str | None]:
    def run() -> str:
        undo()
        return description
    return run
