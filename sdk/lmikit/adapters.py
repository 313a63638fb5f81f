"""LoRA adapters: validate, package deterministically, upload content-addressed, and host
each as an adapter inference component on a running endpoint.

>>> from lmikit.adapters import AdapterRegistry  # doctest: +SKIP
>>> reg = AdapterRegistry("docqa-qwen7b", bucket="my-artifacts")  # doctest: +SKIP
>>> reg.register("legal", "adapters/legal", formatter="adapters/legal/fmt.py")  # doctest: +SKIP
AdapterInfo(name='legal', component='docqa-qwen7b-legal', status='InService', ...)

Before anything is uploaded the adapter is checked: ``adapter_config.json`` is present and
valid, its base model is the endpoint's model, its rank fits the endpoint's
``OPTION_MAX_LORA_RANK``, weights are present and the formatter file (if any) compiles and
defines a formatter. A registration that fails leaves no component behind.

While the endpoint runs LMCache, every adapter gets a ``model.py`` that tags its requests'
cache keys with its name and a digest of its files (:mod:`lmikit.lora_isolation`), so
adapters never reuse each other's KV cache.
"""

from __future__ import annotations

import builtins
import concurrent.futures as cf
import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmikit.deploy._artifacts import (
    StoredArtifact,
    default_bucket,
    delete_artifact,
    upload_artifact,
)
from lmikit.deploy._aws import (
    Clients,
    Clock,
    ProgressFn,
    RealClock,
    Waiter,
    call,
    describe_or_none,
    error_code,
    error_message,
    no_progress,
)
from lmikit.deploy._model import component_environment
from lmikit.errors import AdapterError, DeployError, LmikitError
from lmikit.lora_isolation import lmcache_in_environment
from lmikit.names import (
    ADAPTER_TAG,
    DEPLOYMENT_TAG,
    MODEL_ID_ENV,
    adapter_component_name,
    base_component_name,
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


class AdapterRegistry:
    """Register, list, update and remove adapters of one endpoint.

    ``base_component`` defaults to ``<endpoint>-base`` (the name ``lmikit deploy`` gives it);
    adapter components are named ``<endpoint>-<adapter>``.
    """

    def __init__(self, endpoint: str, *, session: Any = None, region: str | None = None,
                 bucket: str | None = None, kms_key_arn: str | None = None,
                 base_component: str | None = None, clock: Clock | None = None,
                 progress: ProgressFn = no_progress, poll_seconds: float = 5.0,
                 timeout_seconds: float = 900.0, max_workers: int = 16,
                 retry_mode: str = "adaptive") -> None:
        self.endpoint = endpoint
        self.clients = Clients(session, region, retry_mode)
        self._bucket = bucket
        self.kms_key_arn = kms_key_arn
        self.base_component = base_component or base_component_name(endpoint)
        self.clock = clock or RealClock()
        self.progress = progress
        self.max_workers = max_workers
        self.waiter = Waiter(self.clients.sagemaker, self.clock, progress, poll_seconds,
                             timeout_seconds)
        self._base: dict[str, Any] | None = None

    @property
    def bucket(self) -> str:
        if self._bucket is None:
            self._bucket = default_bucket(self.clients)
        return self._bucket

    def component_name(self, name: str) -> str:
        comp = adapter_component_name(self.endpoint, name)
        if not COMPONENT_NAME.match(name) or not COMPONENT_NAME.match(comp) \
                or len(comp) > MAX_COMPONENT_NAME:
            raise AdapterError(f"adapter name {name!r} must be letters, digits and hyphens, and "
                               f"'{self.endpoint}-<name>' at most {MAX_COMPONENT_NAME} "
                               "characters")
        return comp

    # --- the endpoint's base -----------------------------------------------------------

    def base(self) -> dict[str, Any]:
        """The base component's description (cached); checks that it can host adapters."""
        if self._base is None:
            desc = describe_or_none(self.clients.sagemaker, "describe_inference_component",
                                    InferenceComponentName=self.base_component)
            if desc is None or desc.get("EndpointName") != self.endpoint:
                raise AdapterError(f"endpoint {self.endpoint!r} has no base inference component "
                                   f"{self.base_component!r}; deploy it first (lmikit deploy)")
            if desc.get("Specification", {}).get("BaseInferenceComponentName"):
                raise AdapterError(f"{self.base_component!r} is itself an adapter")
            self._base = desc
        return self._base

    def _env(self) -> dict[str, str]:
        return component_environment(self.clients.sagemaker, self.base())

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

    # --- operations --------------------------------------------------------------------

    def list(self) -> list[AdapterInfo]:
        sm = self.clients.sagemaker
        out = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"EndpointNameEquals": self.endpoint, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = call(sm, "list_inference_components", **kwargs)
            for row in page["InferenceComponents"]:
                d = describe_or_none(sm, "describe_inference_component",
                                     InferenceComponentName=row["InferenceComponentName"])
                if d and d.get("Specification", {}).get("BaseInferenceComponentName"):
                    out.append(self._info(d))
            token = page.get("NextToken")
            if not token:
                return sorted(out, key=lambda a: a.name)

    def _info(self, d: dict[str, Any]) -> AdapterInfo:
        comp = d["InferenceComponentName"]
        prefix = f"{self.endpoint}-"
        return AdapterInfo(comp[len(prefix):] if comp.startswith(prefix) else comp, comp,
                           d["InferenceComponentStatus"],
                           d.get("Specification", {}).get("Container", {}).get("ArtifactUrl"),
                           d.get("FailureReason"))

    def register(self, name: str, path: str | Path, formatter: str | Path | None = None, *,
                 wait: bool = True, include: Iterable[str] = ()) -> AdapterInfo:
        """Validate, upload and create the adapter component. Idempotent for equal weights.
        The result's ``excluded`` lists the files the package left out."""
        comp = self.component_name(name)
        package = self.package(name, path, formatter, include)
        return dataclasses.replace(self._register(name, comp, package, wait),
                                   excluded=package.excluded)

    def _register(self, name: str, comp: str, package: AdapterPackage,
                  wait: bool) -> AdapterInfo:
        stored = upload_artifact(self.clients.s3, self.bucket,
                                 f"lmikit/{self.endpoint}/adapters/{name}", package.data,
                                 self.kms_key_arn)
        sm = self.clients.sagemaker
        existing = self._settled(comp)
        if existing is not None:
            have = existing.get("Specification", {}).get("Container", {}).get("ArtifactUrl")
            if existing["InferenceComponentStatus"] == "Failed":
                self._delete(comp)
            elif have == stored.url:
                self.progress_note(comp, "unchanged", existing["InferenceComponentStatus"])
                return self._info(existing)
            else:
                raise AdapterError(f"adapter {name!r} is already registered on "
                                   f"{self.endpoint!r} with other weights; use 'update'")
        body = {
            "InferenceComponentName": comp, "EndpointName": self.endpoint,
            "Specification": {"BaseInferenceComponentName": self.base_component,
                              "Container": {"ArtifactUrl": stored.url}},
            "Tags": [{"Key": DEPLOYMENT_TAG, "Value": self.endpoint},
                     {"Key": ADAPTER_TAG, "Value": name}],
        }
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            sm.create_inference_component(**body)
        except (ClientError, BotoCoreError) as exc:
            return self._create_failed(exc, name, comp, stored, wait)
        return self._finish(comp, stored, wait, created=True)

    def _create_failed(self, exc: BaseException, name: str, comp: str, stored: StoredArtifact,
                       wait: bool) -> AdapterInfo:
        if "already existing" in error_message(exc):
            # a concurrent run is registering it: fine if it is the same artifact
            d = self._settled(comp)
            if d and d.get("Specification", {}).get("Container", {}).get("ArtifactUrl") \
                    == stored.url and d["InferenceComponentStatus"] != "Failed":
                return self._info(d)
        if stored.uploaded:
            try:
                delete_artifact(self.clients.s3, stored)
            except LmikitError:
                pass
        code = error_code(exc)
        if not code:
            raise exc
        raise AdapterError(f"registering {name!r} failed: {code}: {error_message(exc)}") \
            from exc

    def _finish(self, comp: str, stored: StoredArtifact, wait: bool,
                created: bool) -> AdapterInfo:
        if not wait:
            d = describe_or_none(self.clients.sagemaker, "describe_inference_component",
                                 InferenceComponentName=comp)
            return self._info(d) if d else AdapterInfo(comp, comp, "Creating", stored.url)
        try:
            d = self.waiter.in_service("inference-component", comp,
                                       "create" if created else "update")
        except (LmikitError, KeyboardInterrupt) as exc:
            if created:
                self._cleanup(comp)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise AdapterError(f"adapter component {comp} did not come up: {exc}"
                               + ("; it was deleted, nothing is left behind" if created
                                  else "")) from exc
        return self._info(d)

    def _cleanup(self, comp: str) -> None:
        try:
            self._delete(comp)
        except LmikitError:
            pass

    def register_many(self, items: builtins.list[tuple[str, str | Path, str | Path | None]],
                      *, wait: bool = True) -> builtins.list[AdapterInfo]:
        """Register several adapters concurrently; raises AdapterError naming any failures
        after the others finished (successful ones stay registered)."""
        self.base()
        results: dict[str, AdapterInfo] = {}
        errors: list[str] = []
        with cf.ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(items)))) \
                as pool:
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
        """Point an existing adapter at new weights (or formatter)."""
        comp = self.component_name(name)
        existing = self._settled(comp)
        if existing is None:
            raise AdapterError(f"adapter {name!r} is not registered on {self.endpoint!r}; use "
                               "'register'")
        package = self.package(name, path, formatter, include)
        return dataclasses.replace(self._update(name, comp, existing, package, wait),
                                   excluded=package.excluded)

    def _update(self, name: str, comp: str, existing: dict[str, Any], package: AdapterPackage,
                wait: bool) -> AdapterInfo:
        stored = upload_artifact(self.clients.s3, self.bucket,
                                 f"lmikit/{self.endpoint}/adapters/{name}", package.data,
                                 self.kms_key_arn)
        have = existing.get("Specification", {}).get("Container", {}).get("ArtifactUrl")
        if have == stored.url and existing["InferenceComponentStatus"] == "InService":
            return self._info(existing)
        try:
            call(self.clients.sagemaker, "update_inference_component",
                 InferenceComponentName=comp,
                 Specification={"BaseInferenceComponentName": self.base_component,
                                "Container": {"ArtifactUrl": stored.url}})
        except DeployError as exc:
            raise AdapterError(f"updating {name!r} failed: {exc}") from exc
        info = self._finish(comp, stored, wait, created=False)
        if wait and info.artifact_url != stored.url:
            raise AdapterError(f"the update of {name!r} was rolled back: "
                               f"{info.failure or 'no reason given'}")
        return info

    def remove(self, name: str, *, wait: bool = True) -> None:
        comp = self.component_name(name)
        if self._settled(comp) is None:
            raise AdapterError(f"adapter {name!r} is not registered on {self.endpoint!r}")
        self._delete(comp, wait=wait)

    # --- helpers -------------------------------------------------------------------------

    def _settled(self, comp: str) -> dict[str, Any] | None:
        return self.waiter.settled("inference-component", comp)

    def _delete(self, comp: str, wait: bool = True) -> None:
        call(self.clients.sagemaker, "delete_inference_component", InferenceComponentName=comp)
        self.progress_note(comp, "delete", "Deleting")
        if wait:
            self.waiter.gone("inference-component", comp)

    def progress_note(self, comp: str, action: str, status: str) -> None:
        from lmikit.deploy._aws import ProgressEvent

        self.progress(ProgressEvent("inference-component", comp, action, status))
