"""Synth overhead of lmikit's constructs over the same L1 resources written by hand.

Two measurements, each the median of N runs (variants interleaved, so drift in the
machine's load hits them alike):

* **process** (what ``cdk synth`` users wait for): a fresh ``python`` process that imports
  aws_cdk, builds the app and synthesizes it, for ``lmikit`` (``LmiStack`` from the default
  spec: load, plan, render, package, stage assets, IAM, scaling) and for ``bare`` (the same
  resources written by hand, below). The ratio ``lmikit / bare`` here is the headline
  number (target: under 1.3).
* **in-process** (construct work only; jsii runtime already started, three warm-ups): the
  same two apps plus ``lmikit+nag`` (the cdk-nag AwsSolutions and HIPAA.Security packs run on
  the app). This isolates what the constructs cost on top of the L1s.

``bare`` is one stack with every resource of lmikit's template written as a plain
``CfnResource`` with the same type, properties and dependencies (the SageMaker resources,
IAM, scaling, and the CloudWatch dashboard and default alarms), plus the same two assets
(the image build context and the model artifact file), which any hand-written deployment of
this spec also needs. Before timing, :func:`check_same_resources` synthesizes ``bare`` once
and checks its resources equal lmikit's, so the comparison stays like for like.

    python benchmarks/synth_overhead.py [--spec examples/docqa-qwen7b.yaml] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import aws_cdk as cdk  # noqa: E402

from lmikit.spec import load_spec  # noqa: E402
from lmikit_cdk.nag import nag_packs  # noqa: E402
from lmikit_cdk.stack import LmiStack  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = REPO / "examples" / "docqa-qwen7b.yaml"
TARGET_RATIO = 1.3


def synth_lmikit(spec_path: Path, outdir: str, nag: bool = False) -> dict[str, Any]:
    app = cdk.App(outdir=outdir)
    stack = LmiStack.from_file(app, spec_path, build_context=REPO)
    assembly = app.synth()
    if nag:
        for pack in nag_packs():
            pack.validate_scope(app)
    return dict(assembly.get_stack_artifact(stack.artifact_id).template)


def bare_app(template: dict[str, Any], region: str,
             artifact: Path | None) -> Callable[[str], None]:
    """An app that writes the template's resources by hand as L1 CfnResources."""
    from aws_cdk import aws_ecr_assets, aws_s3_assets

    from lmikit_cdk.image import DOCKERFILE, build_context_exclude

    resources = {k: v for k, v in template["Resources"].items()
                 if v["Type"] != "AWS::CDK::Metadata"}

    def run(outdir: str) -> None:
        app = cdk.App(outdir=outdir)
        stack = cdk.Stack(app, "bare", env=cdk.Environment(region=region))
        aws_ecr_assets.DockerImageAsset(stack, "Image", directory=str(REPO), file=DOCKERFILE,
                                        exclude=build_context_exclude(REPO),
                                        ignore_mode=cdk.IgnoreMode.DOCKER)
        if artifact is not None:
            aws_s3_assets.Asset(stack, "Artifact", path=str(artifact))
        made = {}
        for logical_id, res in resources.items():
            made[logical_id] = cdk.CfnResource(stack, logical_id, type=res["Type"],
                                               properties=res.get("Properties", {}))
            made[logical_id].override_logical_id(logical_id)
        for logical_id, res in resources.items():
            for dep in res.get("DependsOn", []):
                made[logical_id].node.add_dependency(made[dep])
        app.synth()
    return run


def check_same_resources(template: dict[str, Any], region: str,
                         artifact: Path | None) -> dict[str, int]:
    """Synthesize ``bare`` once; its resources must equal lmikit's (type, properties,
    dependencies). Returns the resource count by type."""
    with tempfile.TemporaryDirectory() as tmp:
        bare_app(template, region, artifact)(tmp)
        bare = json.loads((Path(tmp) / "bare.template.json").read_text())["Resources"]

    def norm(resources: dict[str, Any]) -> dict[str, Any]:
        return {k: (v["Type"], v.get("Properties", {}), sorted(v.get("DependsOn", [])))
                for k, v in resources.items() if v["Type"] != "AWS::CDK::Metadata"}

    if norm(bare) != norm(template["Resources"]):
        raise SystemExit("the bare app's resources differ from lmikit's template")
    counts: dict[str, int] = {}
    for kind, _, _ in norm(bare).values():
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def timed(fns: dict[str, Callable[[str], Any]], runs: int,
          warmups: int = 3) -> dict[str, list[float]]:
    """Run the variants interleaved (warm-ups first: Node's JIT warms up over a few
    synths), so drift in the machine's load hits every variant alike."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(warmups + runs):
            for name, fn in fns.items():
                start = time.perf_counter()
                fn(str(Path(tmp) / f"{name}-{i}"))
                if i >= warmups:
                    samples[name].append(time.perf_counter() - start)
    return samples


PROCESS_LMIKIT = """
import os, sys
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
import aws_cdk as cdk
from lmikit_cdk.stack import LmiStack
app = cdk.App(outdir=sys.argv[1])
LmiStack.from_file(app, sys.argv[2], build_context=sys.argv[3])
app.synth()
"""

PROCESS_BARE = """
import json, os, sys
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
sys.path.insert(0, sys.argv[3] + "/benchmarks")
import aws_cdk as cdk
from pathlib import Path
from synth_overhead import bare_app
template = json.loads(Path(sys.argv[2]).read_text())
artifact = Path(sys.argv[4]) if sys.argv[4] else None
bare_app(template, sys.argv[5], artifact)(sys.argv[1])
"""


def timed_processes(spec_path: Path, template_path: Path, artifact: Path | None, region: str,
                    runs: int) -> dict[str, list[float]]:
    import subprocess

    samples: dict[str, list[float]] = {"lmikit": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs + 1):
            for name, code, extra in (
                    ("lmikit", PROCESS_LMIKIT, [str(spec_path), str(REPO)]),
                    ("bare", PROCESS_BARE, [str(template_path), str(REPO),
                                            str(artifact or ""), region])):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", code, f"{tmp}/{name}{i}", *extra],
                               check=True, capture_output=True, timeout=300)
                if i:  # the first round warms the OS file cache
                    samples[name].append(time.perf_counter() - start)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    from lmikit.artifact import deterministic_tar  # noqa: F401  (warm the import)
    from lmikit.planner import plan_spec
    from lmikit.render import model_artifact
    from lmikit_cdk.artifacts import stage_bytes

    data = model_artifact(spec, plan_spec(spec, args.spec.parent), args.spec.parent)
    artifact = stage_bytes(data) if data else None
    with tempfile.TemporaryDirectory() as tmp:
        template = synth_lmikit(args.spec, tmp)
        template_path = Path(tmp) / "template.json"
        template_path.write_text(json.dumps(template))
        resources = check_same_resources(template, spec.region, artifact)
        process = timed_processes(args.spec, template_path, artifact, spec.region, args.runs)
    inproc = timed({
        "lmikit": lambda out: synth_lmikit(args.spec, out),
        "lmikit+nag": lambda out: synth_lmikit(args.spec, out, nag=True),
        "bare": bare_app(template, spec.region, artifact),
    }, args.runs)
    med_p = {k: statistics.median(v) for k, v in process.items()}
    med_i = {k: statistics.median(v) for k, v in inproc.items()}
    ratio = med_p["lmikit"] / med_p["bare"]
    report = {
        "spec": str(args.spec), "runs": args.runs, "resources": resources,
        "process_median_seconds": {k: round(v, 3) for k, v in med_p.items()},
        "ratio": round(ratio, 3), "target": TARGET_RATIO, "within_target": ratio < TARGET_RATIO,
        "in_process_median_seconds": {k: round(v, 4) for k, v in med_i.items()},
        "in_process_ratio": round(med_i["lmikit"] / med_i["bare"], 3),
        "in_process_ratio_with_nag": round(med_i["lmikit+nag"] / med_i["bare"], 3),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("resources (lmikit and bare alike): "
          + ", ".join(f"{n} {kind}" for kind, n in resources.items()))
    print(f"process (fresh python, import + build + synth), median of {args.runs}:")
    for name, value in med_p.items():
        print(f"  {name:>10}: {value:7.3f} s")
    print(f"  ratio: {ratio:.2f} (target < {TARGET_RATIO})")
    print(f"in-process (construct work only), median of {args.runs}:")
    for name, value in med_i.items():
        print(f"  {name:>10}: {value * 1000:7.1f} ms")
    print(f"  ratio: {report['in_process_ratio']:.2f}; with cdk-nag: "
          f"{report['in_process_ratio_with_nag']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
