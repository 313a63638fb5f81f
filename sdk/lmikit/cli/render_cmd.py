"""``lmikit render``: print one rendered target for a spec."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from lmikit.cli._common import echo_json, load, spec_argument

if TYPE_CHECKING:
    from lmikit.render.container import ImageKind

TARGETS = ["lmcache", "env", "serving-properties", "sagemaker", "hyperpod", "cloudwatch", "grafana"]


@click.command("render")
@spec_argument
@click.option("--target", "-t", type=click.Choice(TARGETS), required=True,
              help="What to render.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="grafana: write the dashboard JSON to this file instead of stdout.")
@click.option("--namespace", default="default", show_default=True,
              help="hyperpod: Kubernetes namespace of the manifest.")
@click.option("--hourly-price", type=click.FloatRange(min=0, min_open=True), default=None,
              help="grafana: on-demand $/hour per instance for the cost panels (default: "
              "lmikit's small us-east-1 table, where it has the instance type).")
@click.option("--image", "image_kind", type=click.Choice(["stock", "lmikit"]), default="stock",
              show_default=True, help="env, serving-properties, sagemaker: the image that "
              "runs the model (AWS's stock LMI image, or lmikit's container/Dockerfile).")
def render_cmd(spec: Path, target: str, output: Path | None, namespace: str,
               hourly_price: float | None, image_kind: str) -> None:
    """Print the TARGET rendered from SPEC."""
    loaded, plan = load(spec)
    image: ImageKind = "lmikit" if image_kind == "lmikit" else "stock"
    if target == "lmcache":
        from lmikit.render.lmcache import render_lmcache_yaml

        click.echo(render_lmcache_yaml(plan), nl=False)
    elif target == "env":
        from lmikit.render.env import lmi_environment

        echo_json(lmi_environment(loaded, plan, image=image))
    elif target == "serving-properties":
        from lmikit.render.env import serving_properties

        click.echo(serving_properties(loaded, plan, image=image), nl=False)
    elif target == "sagemaker":
        from lmikit.image import lmi_image_uri
        from lmikit.render.sagemaker import render_requests

        urls = {a.name: f"s3://<bucket>/{loaded.name}/adapters/{a.name}/<sha256>.tar.gz"
                for a in loaded.adapters}
        r = render_requests(
            loaded, plan, image_uri=lmi_image_uri(loaded.region, loaded.engine.lmi_version),
            execution_role_arn="arn:aws:iam::123456789012:role/<execution-role>",
            model_artifact_url=f"s3://<bucket>/{loaded.name}/model/<sha256>.tar.gz",
            adapter_artifact_urls=urls, image_kind=image)
        body = {"CreateEndpointConfig": r.endpoint_config, "CreateEndpoint": r.endpoint}
        if r.model is not None:
            body["CreateModel"] = r.model
        echo_json(body | {"CreateInferenceComponent": r.base_component,
                          "Adapters": r.adapter_components})
        for warning in r.warnings:
            click.echo(f"Warning: {warning}", err=True)
    elif target == "hyperpod":
        import yaml

        from lmikit.image import lmi_image_uri
        from lmikit.render.hyperpod import hyperpod_manifest, hyperpod_notes

        manifest = hyperpod_manifest(
            loaded, plan, image_uri=lmi_image_uri(loaded.region, loaded.engine.lmi_version),
            namespace=namespace)
        notes = "".join(f"# note: {n}\n" for n in hyperpod_notes(loaded))
        click.echo(notes + yaml.safe_dump(manifest, sort_keys=False), nl=False)
    elif target == "cloudwatch":
        from lmikit.render.alarms import put_metric_alarm_requests
        from lmikit.render.cloudwatch import dashboard_body, dashboard_name

        echo_json({"DashboardName": dashboard_name(loaded),
                   "DashboardBody": dashboard_body(loaded, plan),
                   "Alarms": put_metric_alarm_requests(loaded, plan)})
    elif target == "grafana":
        from lmikit.render.grafana import render_grafana_json

        text = render_grafana_json(loaded, plan, hourly_price)
        if output is None:
            click.echo(text, nl=False)
        else:
            output.write_text(text)
            click.echo(f"Wrote {output}", err=True)
