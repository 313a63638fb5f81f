"""``lmikit render --target cloudwatch|grafana``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from lmikit.cli import main
from lmikit.render._cloudwatch import dashboard_body
from lmikit.render._grafana import render_grafana_json

from .conftest import EXAMPLES, load_example

SPEC = str(EXAMPLES / "docqa-qwen7b.yaml")


def test_render_cloudwatch_prints_dashboard_and_alarms() -> None:
    result = CliRunner().invoke(main, ["render", SPEC, "--target", "cloudwatch"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    spec, plan = load_example("docqa-qwen7b")
    assert out["DashboardName"] == "docqa-qwen7b-lmikit"
    assert out["DashboardBody"] == dashboard_body(spec, plan)
    assert {a["AlarmName"] for a in out["Alarms"]} >= {"docqa-qwen7b-lmikit-5xx-rate"}


def test_render_grafana_prints_json() -> None:
    result = CliRunner().invoke(main, ["render", SPEC, "-t", "grafana"])
    assert result.exit_code == 0, result.output
    spec, plan = load_example("docqa-qwen7b")
    assert result.output == render_grafana_json(spec, plan)


def test_render_grafana_writes_output_file(tmp_path: Path) -> None:
    target = tmp_path / "dash.json"
    result = CliRunner().invoke(main, ["render", SPEC, "-t", "grafana", "--output",
                                       str(target), "--hourly-price", "2.5", "--image",
                                       "lmikit"])
    assert result.exit_code == 0, result.output
    data = json.loads(target.read_text())
    assert any(p["title"] == "Cost per 1K tokens (live estimate)" for p in data["panels"])


def test_render_image_decides_the_cache_panels_and_alarms() -> None:
    """The CLI renders what the SDK deploys for the same image: AWS's stock image (the
    default) publishes no vLLM/LMCache metrics, so no cache panel or alarm; lmikit's does."""
    spec, plan = load_example("docqa-qwen7b")
    for image in ("stock", "lmikit"):
        args = ["render", SPEC, "-t", "cloudwatch", "--image", image]
        out = json.loads(CliRunner().invoke(main, args).output)
        assert out["DashboardBody"] == dashboard_body(spec, plan, image=image)
        names = {a["AlarmName"] for a in out["Alarms"]}
        assert ("docqa-qwen7b-lmikit-hit-rate-collapse" in names) is (image == "lmikit")
        grafana = CliRunner().invoke(main, ["render", SPEC, "-t", "grafana", "--image", image])
        assert grafana.output == render_grafana_json(spec, plan, image=image)


def test_render_rejects_non_positive_price() -> None:
    result = CliRunner().invoke(main, ["render", SPEC, "-t", "grafana", "--hourly-price", "0"])
    assert result.exit_code == 2
    assert "hourly-price" in result.output


def test_render_rejects_a_price_past_any_instance_s() -> None:
    """As price files do (MAX_USD_PER_HOUR): 1e308 an hour makes every cost infinite."""
    result = CliRunner().invoke(main, ["render", SPEC, "-t", "grafana", "--hourly-price",
                                       "1e308"])
    assert result.exit_code == 2
    assert "1e+308 is not in the range 0<x<=10000.0" in result.output
