"""LoRA adapters: validate, package deterministically, upload content-addressed, and host
each as an adapter inference component on a running endpoint.

>>> from lmikit.adapters import AdapterRegistry  # doctest: +SKIP
>>> reg = AdapterRegistry("docqa-qwen7b", bucket="my-artifacts")  # doctest: +SKIP
>>> reg.register("legal", "adapters/legal", formatter="adapters/legal/fmt.py")  # doctest: +SKIP
AdapterInfo(name='legal', component='docqa-qwen7b-legal', status='InService', ...)

Before anything is uploaded the adapter is checked: ``adapter_config.json`` is present and
valid, its base model is the endpoint's model, its rank fits the endpoint's
``OPTION_MAX_LORA_RANK``, weights are present and the formatter file (if any) compiles and
defines a formatter. A registration that fails (or is refused) leaves no component and no
artifact behind, and says so only when that is true.

The registry acts only on adapter components of the endpoint's own deployment (tagged for
it, on its base), takes the region and bucket from the deployment (:meth:`for_spec`, or the
endpoint's ``lmikit:bucket`` tag), and holds the deployment's lease while it changes
anything, so it never races ``lmikit deploy`` or its garbage collection. What it registers is
tagged ``lmikit:managed-by=adapters``: ``lmikit deploy`` keeps it although the spec does not
list it, until :meth:`AdapterRegistry.adopt` hands it to the spec.

While the endpoint runs LMCache, every adapter gets a ``model.py`` that tags its requests'
cache keys with its name and a digest of its files (:mod:`lmikit.lora_isolation`), so
adapters never reuse each other's KV cache.
"""

from __future__ import annotations

import builtins
import concurrent.futures as cf
import dataclasses
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit import aws
from lmikit.aws import Clients, Clock, ProgressEvent, ProgressFn, RealClock, Waiter, no_progress
from lmikit.errors import AdapterError, AwsError, Interrupted, LmikitError
from lmikit.lora_isolation import lmcache_in_environment
from lmikit.names import (
    ADAPTER_TAG,
    BUCKET_TAG,
    MANAGED_BY_ADAPTERS,
    MANAGED_BY_SPEC,
    MANAGED_BY_TAG,
    MODEL_ID_ENV,
    adapter_component_name,
    adapter_manager,
    artifact_prefix,
    base_component_name,
    deployment_prefix,
    deployment_tags,
)
from lmikit.packaging import (  # re-exported: packaging lives in lmikit.packaging
    DEFAULT_EXCLUDES,
    WEIGHT_FILES,
    AdapterCheck,
    AdapterPackage,
    check_adapter,
    check_formatter_file,
    check_spec_adapter,
    package_adapter,
    package_spec_adapter,
)

if TYPE_CHECKING:
    from lmikit.spec import DeploymentSpec

__all__ = ["DEFAULT_EXCLUDES", "WEIGHT_FILES", "AdapterCheck", "AdapterInfo", "AdapterPackage",
           "AdapterRegistry", "check_adapter", "check_formatter_file", "check_spec_adapter",
           "package_adapter", "package_spec_adapter"]

COMPONENT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
MAX_COMPONENT_NAME = 63


@dataclass(frozen=True)
class AdapterInfo:
    name: str
    component: str
    status: str
    artifact_url: str | None = None
    failure: str | None = None
    excluded: tuple[str, ...] = ()  # files left out of the uploaded package
    # who manages it (lmikit.names.adapter_manager): "adapters" (this registry) or "spec"
    managed_by: str = MANAGED_BY_ADAPTERS


class AdapterRegistry:
    """Register, list, update and remove adapters of one endpoint.

    ``base_component`` defaults to ``<endpoint>-base`` (the name ``lmikit deploy`` gives it);
    adapter components are named ``<endpoint>-<adapter>``. ``bucket`` defaults to the one
    the endpoint's ``lmikit:bucket`` tag names, else ``sagemaker-<region>-<account>``.
    ``lease_wait_seconds`` is how long a change waits for a deploy (or another registry)
    holding the deployment's lease.
    """

    def __init__(self, endpoint: str, *, session: Any = None, region: str | None = None,
                 bucket: str | None = None, kms_key_arn: str | None = None,
                 base_component: str | None = None, clock: Clock | None = None,
                 progress: ProgressFn = no_progress, poll_seconds: float = 5.0,
                 timeout_seconds: float = 900.0, max_workers: int = 16,
                 retry_mode: str = "adaptive", lease_wait_seconds: float = 300.0,
                 force_unlock: bool = False) -> None:
        if bucket is not None:
            aws.check_bucket_name(bucket)
        self.endpoint = endpoint
        self.clients = Clients(session, region, retry_mode)
        self._bucket = bucket
        self.kms_key_arn = kms_key_arn
        self.base_component = base_component or base_component_name(endpoint)
        self.clock = clock or RealClock()
        self.progress = progress
        self.max_workers = max_workers
        self.poll_seconds = poll_seconds
        self.lease_wait_seconds = lease_wait_seconds
        self.force_unlock = force_unlock
        self.waiter = Waiter(self.clients.sagemaker, self.clock, progress, poll_seconds,
                             timeout_seconds)
        self._base: dict[str, Any] | None = None
        self._lease: aws.Lease | None = None

    @classmethod
    def for_spec(cls, spec: DeploymentSpec, **kwargs: Any) -> AdapterRegistry:
        """The registry of ``spec``'s endpoint, in the spec's region with its KMS key."""
        kwargs.setdefault("region", spec.region)
        kwargs.setdefault("kms_key_arn", spec.security.kms_key_arn)
        return cls(spec.name, **kwargs)

    @property
    def region(self) -> str:
        return self.clients.region

    @property
    def bucket(self) -> str:
        if self._bucket is None:
            tags = aws.tags_of(self.clients.sagemaker, self._endpoint()["EndpointArn"])
            self._bucket = tags.get(BUCKET_TAG) or aws.default_bucket(self.clients)
        return self._bucket

    def where(self) -> str:
        """One line naming the endpoint, its region and the artifact bucket."""
        return (f"endpoint {self.endpoint} in {self.region}, artifacts in "
                f"s3://{self.bucket}/{deployment_prefix(self.endpoint)}")

    def store(self) -> aws.ArtifactStore:
        return aws.ArtifactStore(self.clients.s3, self.bucket, deployment=self.endpoint,
                                 region=self.region, kms_key_arn=self.kms_key_arn)

    def component_name(self, name: str) -> str:
        comp = adapter_component_name(self.endpoint, name)
        if not COMPONENT_NAME.match(name) or not COMPONENT_NAME.match(comp) \
                or len(comp) > MAX_COMPONENT_NAME:
            raise AdapterError(f"adapter name {name!r} must be letters, digits and hyphens, and "
                               f"'{self.endpoint}-<name>' at most {MAX_COMPONENT_NAME} "
                               "characters")
        if comp == self.base_component:
            raise AdapterError(f"{name!r} names {comp}, the base inference component of "
                               f"{self.endpoint!r}, not an adapter; `lmikit destroy` removes "
                               "a deployment's base")
        return comp

    # --- the endpoint's base -----------------------------------------------------------

    def _endpoint(self) -> dict[str, Any]:
        desc = aws.describe(self.clients.sagemaker, "endpoint", self.endpoint)
        if desc is None:
            raise AdapterError(f"endpoint {self.endpoint!r} not found in region {self.region}; "
                               "deploy it first, or pass the spec (--spec) or --region")
        return desc

    def base(self) -> dict[str, Any]:
        """The base component's description (cached); checks that it can host adapters."""
        if self._base is None:
            sm = self.clients.sagemaker
            self._endpoint()
            desc = aws.describe(sm, "inference-component", self.base_component)
            if desc is None or desc.get("EndpointName") != self.endpoint:
                raise AdapterError(f"endpoint {self.endpoint!r} has no base inference component "
                                   f"{self.base_component!r} in {self.region}; deploy it first "
                                   "(lmikit deploy)")
            if aws.base_of(desc):
                raise AdapterError(f"{self.base_component!r} is itself an adapter")
            owner = aws.owner_of(aws.tags_of(sm, desc["InferenceComponentArn"]))
            if owner != self.endpoint:
                raise AdapterError(aws.not_ours_message("inference-component",
                                                        self.base_component, self.endpoint,
                                                        owner))
            self._base = desc
        return self._base

    def _env(self) -> dict[str, str]:
        return aws.component_environment(self.clients.sagemaker, self.base())

    def max_rank(self) -> int:
        env = self._env()
        if env.get("OPTION_ENABLE_LORA") != "true":
            raise AdapterError(f"endpoint {self.endpoint!r} was deployed without LoRA support "
                               "(OPTION_ENABLE_LORA is not 'true'); add at least one adapter "
                               "to the spec's adapters list and redeploy")
        return int(env.get("OPTION_MAX_LORA_RANK", "16"))

    def package(self, name: str, path: str | Path, formatter: str | Path | None = None,
                include: Iterable[str] = ()) -> AdapterPackage:
        """Package adapter ``name``; tagged for cache isolation when the base runs LMCache.
        ``include`` patterns put back files the default exclusions leave out."""
        env = self._env()
        return package_adapter(path, formatter=formatter, model_id=env.get(MODEL_ID_ENV),
                               max_rank=self.max_rank(),
                               cache_tag_name=name if lmcache_in_environment(env) else None,
                               include=include)

    def adapter(self, name: str) -> dict[str, Any] | None:
        """Adapter ``name``'s component as described (settled), or None when there is none.

        Refuses a component of that name that is not an adapter of this endpoint's own
        deployment (the base itself, or another deployment's component)."""
        comp = self.component_name(name)
        desc = self.waiter.settled("inference-component", comp)
        if desc is None:
            return None
        owner = aws.owner_of(aws.tags_of(self.clients.sagemaker,
                                         desc["InferenceComponentArn"]))
        if owner != self.endpoint or desc.get("EndpointName") != self.endpoint:
            raise AdapterError(f"{name!r} names inference component {comp}, which belongs to "
                               + (f"deployment {owner!r}" if owner else "no lmikit deployment")
                               + f" (endpoint {desc.get('EndpointName')!r}), not to "
                               f"{self.endpoint!r}; lmikit leaves it alone")
        if aws.base_of(desc) != self.base_component:
            raise AdapterError(f"{comp} is a base inference component, not an adapter of "
                               f"{self.base_component}; `lmikit destroy` removes a base")
        return desc

    # --- operations --------------------------------------------------------------------

    @contextmanager
    def _leased(self, operation: str) -> Iterator[None]:
        if self._lease is not None:  # register_many holds it for its registrations
            yield
            return
        store = self.store()
        store.ensure_bucket()
        lease = aws.Lease(self.clients.s3, self.bucket, self.endpoint, clock=self.clock,
                          operation=operation)
        lease.acquire(force=self.force_unlock, wait_seconds=self.lease_wait_seconds,
                      poll_seconds=self.poll_seconds)
        self._lease = lease
        try:
            yield
        finally:
            self._lease = None
            lease.release()

    def list(self) -> builtins.list[AdapterInfo]:
        """Every adapter of the endpoint, and who manages it (``managed_by``; the registry
        does not read the spec, so an untagged adapter counts as not listed in it)."""
        sm = self.clients.sagemaker
        found = []
        for d in aws.components_of(sm, self.endpoint):
            if aws.base_of(d) != self.base_component:
                continue
            tags = aws.tags_of(sm, d["InferenceComponentArn"])
            if aws.owner_of(tags) == self.endpoint:
                found.append(self._info(d, tags))
        return sorted(found, key=lambda a: a.name)

    def _info(self, d: dict[str, Any], tags: dict[str, str] | None = None) -> AdapterInfo:
        """``d`` as an AdapterInfo; ``tags`` (read when not given) say who manages it."""
        comp = d["InferenceComponentName"]
        prefix = f"{self.endpoint}-"
        if tags is None:
            tags = aws.tags_of(self.clients.sagemaker, d["InferenceComponentArn"])
        return AdapterInfo(comp[len(prefix):] if comp.startswith(prefix) else comp, comp,
                           d["InferenceComponentStatus"], aws.artifact_of(d),
                           d.get("FailureReason"),
                           managed_by=adapter_manager(tags, listed=False))

    def register(self, name: str, path: str | Path, formatter: str | Path | None = None, *,
                 wait: bool = True, include: Iterable[str] = ()) -> AdapterInfo:
        """Validate, upload and create the adapter component. Idempotent for equal weights.
        The result's ``excluded`` lists the files the package left out.

        Ctrl-C (KeyboardInterrupt) deletes what the registration made and raises
        :class:`~lmikit.errors.Interrupted` saying so."""
        comp = self.component_name(name)
        package = self.package(name, path, formatter, include)
        done: builtins.list[AdapterInfo] = []
        try:
            with package, self._leased("adapters register"):
                done.append(dataclasses.replace(
                    self._register(name, comp, aws.package_source(package), wait),
                    excluded=package.excluded))
            return done[0]
        except KeyboardInterrupt as exc:
            if done:
                raise Interrupted(f"registered {name!r} ({done[0].component} "
                                  f"{done[0].status}); Ctrl-C came after that",
                                  state="new") from exc
            raise Interrupted(f"registering {name!r} was interrupted (Ctrl-C) before it "
                              "changed anything", state="old") from exc

    def _register(self, name: str, comp: str, source: aws.ArtifactSource,
                  wait: bool) -> AdapterInfo:
        existing = self.adapter(name)
        store = self.store()
        prefix = artifact_prefix(self.endpoint, name)
        key = aws.artifact_key(prefix, source.sha256)
        if existing is not None:
            if existing["InferenceComponentStatus"] == "Failed":
                self._delete(comp)
            elif aws.artifact_of(existing) == store.url(prefix, source.sha256):
                self._note(comp, "unchanged", existing["InferenceComponentStatus"])
                return self._info(existing)
            else:
                raise AdapterError(f"adapter {name!r} is already registered on "
                                   f"{self.endpoint!r} with other weights; use 'update' "
                                   "(nothing was uploaded)")
        stored = aws.StoredArtifact(store.bucket, key, source.sha256,
                                    uploaded=store.head(key) is None)
        body = {"InferenceComponentName": comp, "EndpointName": self.endpoint,
                "Specification": {"BaseInferenceComponentName": self.base_component,
                                  "Container": {"ArtifactUrl": stored.url}},
                "Tags": deployment_tags(self.endpoint, {ADAPTER_TAG: name,
                                                        MANAGED_BY_TAG: MANAGED_BY_ADAPTERS})}
        try:
            self._put(store, prefix, source, name)
            aws.create(self.clients.sagemaker, "inference-component", body, self.endpoint)
            return self._finish(comp, wait, "create")
        except KeyboardInterrupt as exc:  # Ctrl-C: undo what is in flight, and say so
            left = self._clean_up(comp, stored)
            raise Interrupted(f"registering {name!r} was interrupted (Ctrl-C)" + (
                "; left behind: " + "; ".join(left) if left else
                "; what it created was deleted, nothing is left behind"),
                state="partial" if left else "old", left=tuple(left)) from exc
        except LmikitError as exc:
            raise self._failed(f"registering {name!r}", comp, stored, exc) from exc

    def _failed(self, what: str, comp: str | None, stored: aws.StoredArtifact,
                exc: LmikitError) -> AdapterError:
        left = self._clean_up(comp, stored)
        return AdapterError(f"{what} failed: {exc}" + (
            "; left behind: " + "; ".join(left) if left else
            "; what it created was deleted, nothing is left behind"))

    def _clean_up(self, comp: str | None, stored: aws.StoredArtifact) -> builtins.list[str]:
        """Delete what a failed registration made (the component, an artifact it uploaded
        that nothing uses); returns what is left."""
        try:
            if comp is not None and aws.describe(self.clients.sagemaker, "inference-component",
                                                 comp):
                self.waiter.settled("inference-component", comp)
                self._delete(comp)
            comps = aws.components_of(self.clients.sagemaker, self.endpoint)
            users = [c["InferenceComponentName"] for c in comps
                     if aws.artifact_of(c) == stored.url]
            busy = [c["InferenceComponentName"] for c in comps
                    if c["InferenceComponentStatus"] in ("Creating", "Updating")]
            if stored.uploaded and (users or busy):  # an update in flight may be using it
                return [f"artifact {stored.url} (in use by {', '.join(users or busy)}; "
                        "`lmikit gc` deletes it once nothing uses it)"]
            if stored.uploaded:
                self.store().delete_key(stored.key)
        except LmikitError as err:
            return [f"{comp or 'the component'} or artifact {stored.url} (could not check or "
                    f"delete: {err})"]
        return []

    def _finish(self, comp: str, wait: bool, action: str) -> AdapterInfo:
        if not wait:
            d = aws.describe(self.clients.sagemaker, "inference-component", comp)
            return self._info(d) if d else AdapterInfo(comp, comp, "Creating")
        return self._info(self.waiter.in_service("inference-component", comp, action))

    def register_many(self, items: builtins.list[tuple[str, str | Path, str | Path | None]],
                      *, wait: bool = True) -> builtins.list[AdapterInfo]:
        """Register several adapters concurrently; raises AdapterError naming any failures
        after the others finished (successful ones stay registered)."""
        self.base()
        results: dict[str, AdapterInfo] = {}
        errors: list[str] = []
        with self._leased("adapters register-dir"), cf.ThreadPoolExecutor(
                max_workers=max(1, min(self.max_workers, len(items)))) as pool:
            futures = {pool.submit(self.register, n, p, f, wait=wait): n for n, p, f in items}
            for fut in cf.as_completed(futures):
                try:
                    results[futures[fut]] = fut.result()
                except LmikitError as exc:
                    errors.append(f"{futures[fut]}: {exc}")
        if errors:
            raise AdapterError(f"{len(errors)} of {len(items)} adapter(s) failed to register:\n"
                               + "\n".join(f"  - {e}" for e in sorted(errors)))
        return [results[n] for n, _, _ in items]

    def update(self, name: str, path: str | Path, formatter: str | Path | None = None, *,
               wait: bool = True, include: Iterable[str] = ()) -> AdapterInfo:
        """Point an existing adapter at new weights (or formatter). The result's ``excluded``
        lists the files the package left out."""
        comp = self.component_name(name)
        package = self.package(name, path, formatter, include)
        with package, self._leased("adapters update"):
            existing = self.adapter(name)
            if existing is None:
                raise AdapterError(f"adapter {name!r} is not registered on {self.endpoint!r}; "
                                   "use 'register'")
            source = aws.package_source(package)
            prefix = artifact_prefix(self.endpoint, name)
            if aws.artifact_of(existing) == self.store().url(prefix, source.sha256) and \
                    existing["InferenceComponentStatus"] == "InService":
                return dataclasses.replace(self._info(existing), excluded=package.excluded)
            stored = self._put(self.store(), prefix, source, name)
            try:
                self._set_artifact(comp, stored.url)
                info = self._finish(comp, wait, "update")
                if wait and info.artifact_url != stored.url:
                    raise AdapterError(f"the update was rolled back: "
                                       f"{info.failure or 'no reason given'}")
            except LmikitError as exc:
                raise self._failed(f"updating {name!r}", None, stored, exc) from exc
            return dataclasses.replace(info, excluded=package.excluded)

    def _set_artifact(self, comp: str, url: str) -> None:
        """UpdateInferenceComponent to ``url``; an answer lost is no failure."""
        try:
            aws.call(self.clients.sagemaker, "update_inference_component",
                     InferenceComponentName=comp,
                     Specification={"BaseInferenceComponentName": self.base_component,
                                    "Container": {"ArtifactUrl": url}})
        except AwsError:
            after = self.waiter.settled("inference-component", comp) or {}
            if aws.artifact_of(after) != url:
                raise

    def remove(self, name: str, *, wait: bool = True) -> AdapterInfo:
        """Delete adapter ``name``'s component (only an adapter of this deployment); returns
        what it was (``managed_by`` ``spec``: the next ``lmikit deploy`` creates it again
        unless it is taken out of the spec)."""
        comp = self.component_name(name)
        with self._leased("adapters remove"):
            desc = self.adapter(name)
            if desc is None:
                raise AdapterError(f"adapter {name!r} is not registered on {self.endpoint!r}")
            info = self._info(desc)
            self._delete(comp, wait=wait)
        return info

    def adopt(self, name: str, spec: DeploymentSpec) -> AdapterInfo:
        """Put adapter ``name``, registered with the registry, under ``spec``: tag it
        ``lmikit:managed-by=spec``, so that ``lmikit deploy`` manages it from then on (and
        updates it to the spec's source where that differs). Refused unless ``spec`` is this
        endpoint's and lists ``name``; an adapter the spec manages already is left as it is."""
        comp = self.component_name(name)
        if spec.name != self.endpoint:
            raise AdapterError(f"the spec deploys {spec.name!r}, not endpoint "
                               f"{self.endpoint!r}: adopt into the spec of {self.endpoint!r}")
        listed = [a.name for a in spec.adapters]
        if name not in listed:
            raise AdapterError(
                f"adapter {name!r} is not in the spec's adapters ("
                + (", ".join(listed) if listed else "it lists none") + "): add it there "
                f"(- {{name: {name}, source: <its folder or s3:// URL>}}) first, then adopt "
                "it; nothing was changed")
        with self._leased("adapters adopt"):
            desc = self.adapter(name)
            if desc is None:
                raise AdapterError(f"adapter {name!r} is not registered on {self.endpoint!r} "
                                   f"({comp} does not exist): `lmikit deploy` creates it from "
                                   "the spec; nothing to adopt")
            arn = desc["InferenceComponentArn"]
            if aws.tags_of(self.clients.sagemaker, arn).get(MANAGED_BY_TAG) != MANAGED_BY_SPEC:
                aws.call(self.clients.sagemaker, "add_tags", ResourceArn=arn,
                         Tags=[{"Key": MANAGED_BY_TAG, "Value": MANAGED_BY_SPEC}])
                self._note(comp, "adopt", f"tagged {MANAGED_BY_TAG}={MANAGED_BY_SPEC}")
            return self._info(desc)

    # --- helpers -------------------------------------------------------------------------

    def _delete(self, comp: str, wait: bool = True) -> None:
        aws.delete(self.clients.sagemaker, "inference-component", comp)
        self._note(comp, "delete", "Deleting")
        if wait:
            self.waiter.gone("inference-component", comp)

    def _put(self, store: aws.ArtifactStore, prefix: str, source: aws.ArtifactSource,
             name: str) -> aws.StoredArtifact:
        """Upload (streamed; progress every 5%) unless the artifact is there already."""
        url = store.url(prefix, source.sha256)

        def note(pct: int, sent: int) -> None:
            self.progress(ProgressEvent("artifact", url, "upload", f"{pct}%",
                                        0.0, f"adapter {name}, {sent:,} of {source.size:,} bytes",
                                        self.clock.monotonic()))
        return store.put(prefix, source, on_bytes=aws.upload_progress(source.size, note))

    def _note(self, comp: str, action: str, status: str) -> None:
        self.progress(ProgressEvent("inference-component", comp, action, status, 0.0, "",
                                    self.clock.monotonic()))
