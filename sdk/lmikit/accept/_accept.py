r"""One acceptance path for a spec file: load it, plan it, and render every target it is for.

``lmikit validate``, ``render``, ``plan`` and ``deploy`` all call :func:`accept_spec`, so they
cannot disagree: a spec that ``validate`` accepts renders to every target, and a spec that
``render --target X`` refuses is refused by ``validate`` (and by ``validate --target X``).
Rendering is the check: each renderer is a pure function of (spec, plan), so running it with
placeholder deployment inputs (bucket, role, artifact URLs) raises exactly the errors the real
render would.

The order is that of the data: the file (SpecError), the model and instance catalogs
(CatalogError), the plan (PlanError), the files the spec names: adapters and formatters
(AdapterError, every problem with its field and line; :mod:`lmikit.accept._spec_files`), then each
target (RenderError, one problem per line, each naming the targets that refuse it).

>>> import pathlib, tempfile
>>> spec = pathlib.Path(tempfile.mkdtemp()) / "docqa.yaml"
>>> _ = spec.write_text("api_version: v1\nname: docqa\nregion: us-east-1\n"
...                     "model: {id: Qwen/Qwen2.5-7B-Instruct}\ninstance: {type: ml.g6e.2xlarge}\n")
>>> accepted = accept_spec(spec, targets=("lmcache", "env"))
>>> accepted.plan.tier, sorted(accepted.rendered)
('cpu', ['env', 'lmcache'])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit.errors import RenderError

if TYPE_CHECKING:  # the CLI imports TARGETS at start-up; the rest loads on first use
    from lmikit.catalog import ImageKind, PriceTable
    from lmikit.planner import Plan
    from lmikit.resolve import Resolved
    from lmikit.spec import DeploymentSpec

TARGETS = ("lmcache", "env", "serving-properties", "sagemaker", "hyperpod", "cloudwatch",
           "grafana")
# What `lmikit deploy` creates: the SageMaker resources, their LMI configuration and alarms.
DEPLOY_TARGETS = ("lmcache", "env", "serving-properties", "sagemaker", "cloudwatch")
IMAGE_TARGETS = ("sagemaker", "hyperpod")
# What depends on which image runs the model (RenderOptions.image).
IMAGE_KIND_TARGETS = ("env", "serving-properties", "sagemaker", "cloudwatch", "grafana")
# Stand-ins for what only a deployment knows; renderers treat them as opaque strings.
PLACEHOLDER_ROLE = "arn:aws:iam::123456789012:role/<execution-role>"
PLACEHOLDER_IMAGE = "<lmi-image>"


@dataclass(frozen=True)
class RenderOptions:
    """Target options that are not part of the spec."""

    namespace: str = "default"  # hyperpod: Kubernetes namespace of the manifest
    hourly_price: float | None = None  # grafana: on-demand $/hour per instance
    vllm_image: str | None = None  # hyperpod: vLLM worker image (None: lmikit picks)
    image: ImageKind = "stock"  # IMAGE_KIND_TARGETS: AWS's stock LMI image or lmikit's
    prices: PriceTable | None = None  # grafana: a price file (`lmikit prices fetch`)


@dataclass(frozen=True)
class Accepted:
    """A spec that loaded, planned and rendered to every target asked for."""

    spec: DeploymentSpec
    plan: Plan
    rendered: Mapping[str, str] = field(default_factory=dict)  # target -> printed text
    image_uri: str | None = None  # None: no target asked for needs the image
    notes: tuple[str, ...] = ()  # checks that could not run (an uploaded adapter)
    warnings: tuple[str, ...] = ()  # what a renderer says the deployment will lack
    image_note: str | None = None  # what the stock image leaves out, and what to change
    gate_note: str | None = None  # a Hub model whose gate lmikit cannot tell (validate)

    def output(self, target: str) -> str:
        """The text ``lmikit render --target`` prints for ``target``."""
        return self.rendered[target]


def accept_spec(path: str | Path, targets: Iterable[str] = TARGETS,
                options: RenderOptions | None = None) -> Accepted:
    """Load, plan and render ``targets`` for the spec at ``path``; raise the first stage's
    LmikitError, with every refusing target listed once."""
    chosen = tuple(dict.fromkeys(targets))
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        raise ValueError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    from lmikit.accept._spec_files import check_spec_files
    from lmikit.planner import plan_spec
    from lmikit.spec import parse_yaml, read_spec_text, validate_data

    source = str(path)
    data, lines = parse_yaml(read_spec_text(path), source)
    spec = validate_data(data, lines, source)
    plan = plan_spec(spec, base_dir=Path(path).parent)
    options = options or RenderOptions()
    resolved = resolve_options(spec, plan, options)  # every derived decision, made once
    notes = check_spec_files(spec, plan, Path(path).parent, lines, source, resolved=resolved)
    refusals: dict[str, list[str]] = {}  # message -> targets refusing with it
    image_uri: str | None = None
    if any(t in IMAGE_TARGETS for t in chosen):
        from lmikit.catalog import lmi_image_uri

        try:
            image_uri = lmi_image_uri(spec.region, spec.engine.lmi_version)
        except RenderError as exc:
            refusals.setdefault(str(exc), []).extend(t for t in chosen if t in IMAGE_TARGETS)
    refused = {t for ts in refusals.values() for t in ts}
    rendered: dict[str, str] = {}
    warnings: list[str] = []
    for target in chosen:
        if target in refused:
            continue
        try:
            rendered[target] = render_target(target, spec, plan, options,
                                             image_uri or PLACEHOLDER_IMAGE, warnings,
                                             resolved=resolved)
        except RenderError as exc:
            targets_for = refusals.setdefault(str(exc), [])
            if target not in targets_for:
                targets_for.append(target)
    if refusals:
        listed = [f"  - {', '.join(ts)}: {message}" for message, ts in refusals.items()]
        fine = [t for t in chosen if t in rendered]
        hint = f"\n  ({', '.join(fine)} {'renders' if len(fine) == 1 else 'render'} it; use " \
            "--target to check only the targets you use)" if fine else ""
        raise RenderError(f"{len(listed)} problem(s) rendering {path}:\n" + "\n".join(listed)
                          + hint)
    image_note = None
    if options.image == "stock" and set(chosen) & set(IMAGE_KIND_TARGETS):
        from lmikit.render import stock_image_note

        image_note = stock_image_note(spec, plan, resolved=resolved)
    gate_note = None
    if any(t in IMAGE_TARGETS for t in chosen):  # the targets that download the weights
        from lmikit.render import gating_note

        gate_note = gating_note(spec, resolved=resolved)
    return Accepted(spec, plan, rendered, image_uri, notes, tuple(dict.fromkeys(warnings)),
                    image_note, gate_note)


def resolve_options(spec: DeploymentSpec, plan: Plan, options: RenderOptions,
                    image_kind: ImageKind | None = None) -> Resolved:
    """The decisions every target renders from: (spec, plan) resolved for ``image_kind``
    (default: the options' image), the planned cost priced as the options say."""
    from lmikit.resolve import resolve_spec

    return resolve_spec(spec, plan, image_kind=image_kind or options.image,
                        hourly_price=options.hourly_price, prices=options.prices)


def render_target(target: str, spec: DeploymentSpec, plan: Plan,
                  options: RenderOptions | None = None,
                  image_uri: str = PLACEHOLDER_IMAGE, warnings: list[str] | None = None, *,
                  resolved: Resolved | None = None) -> str:
    """The text of one target (JSON targets end with a newline, as printed); renderer
    warnings are appended to ``warnings``. ``resolved``: the decisions of (spec, plan) for
    the options' image (:func:`resolve_options`), made here when not given."""
    options = options or RenderOptions()
    resolved = resolved or resolve_options(spec, plan, options)
    if target == "lmcache":
        from lmikit.render import render_lmcache_yaml

        return render_lmcache_yaml(plan)
    if target == "env":
        from lmikit.render import lmi_environment

        return _json(lmi_environment(spec, plan, image=options.image, resolved=resolved))
    if target == "serving-properties":
        from lmikit.render import serving_properties

        if resolved.sagemaker_copies_weights:  # no model artifact: nothing to render
            return ("# no serving.properties: SageMaker copies the S3 weights into "
                    "/opt/ml/model, and every LMI option is\n# an OPTION_* variable of the "
                    "SageMaker Model's environment (lmikit render --target env)\n")
        return serving_properties(spec, plan, image=options.image, resolved=resolved)
    if target == "sagemaker":
        from lmikit.render import render_requests

        urls = {a.name: f"s3://<bucket>/{spec.name}/adapters/{a.name}/<sha256>.tar.gz"
                for a in spec.adapters}
        from lmikit.catalog import lmikit_image_placeholder

        if options.image == "lmikit":  # never the stock URI beside lmikit-only environment
            image_uri = lmikit_image_placeholder(image_uri)
        r = render_requests(spec, plan, image_uri=image_uri,
                            execution_role_arn=PLACEHOLDER_ROLE,
                            model_artifact_url=f"s3://<bucket>/{spec.name}/model/<sha256>.tar.gz",
                            adapter_artifact_urls=urls, image_kind=options.image,
                            resolved=resolved)
        if warnings is not None:
            warnings.extend(r.warnings)
        body: dict[str, object] = {"CreateEndpointConfig": r.endpoint_config,
                                   "CreateEndpoint": r.endpoint}
        if r.model is not None:
            body["CreateModel"] = r.model
        return _json(body | {"CreateInferenceComponent": r.base_component,
                             "Adapters": r.adapter_components})
    if target == "hyperpod":
        import yaml

        from lmikit.render import hyperpod_manifest, hyperpod_notes

        # the HyperPod workers run the stock LMI image or vLLM's, whatever options.image says
        stock = resolved if resolved.image_kind == "stock" else \
            resolve_options(spec, plan, options, "stock")
        manifest = hyperpod_manifest(spec, plan, image_uri=image_uri,
                                     namespace=options.namespace,
                                     vllm_image=options.vllm_image, resolved=stock)
        notes = "".join(f"# note: {n}\n" for n in hyperpod_notes(
            spec, plan, options.vllm_image, resolved=stock))
        return notes + yaml.safe_dump(manifest, sort_keys=False)
    if target == "cloudwatch":
        from lmikit.render import dashboard_body, dashboard_name, put_metric_alarm_requests

        return _json({"DashboardName": dashboard_name(spec),
                      "DashboardBody": dashboard_body(spec, plan, image=options.image,
                                                      resolved=resolved),
                      "Alarms": put_metric_alarm_requests(spec, plan, image=options.image,
                                                          resolved=resolved)})
    if target == "grafana":
        from lmikit.render import render_grafana_json

        return render_grafana_json(spec, plan, options.hourly_price, options.prices,
                                   image=options.image, resolved=resolved)
    raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
