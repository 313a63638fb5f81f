"""The wheel's compiled simulator (``setup.py``: mypyc) gives the pure-Python results exactly.

A wheel or ``pip install .`` compiles the event loop, its tiers, routers, engine model and
request classes with mypyc; the editable install the tests run on is pure Python. mypyc
keeps Python's semantics for annotated code but checks the annotations at run time and can
differ where code relies on something the annotations do not say, so this builds the
extension the way the wheel does and compares every result, per request, across workloads
that reach every rule of the loop: prefix hits in every tier, a shared remote store,
preemption in a full pool, think times, a replayed trace's open loop and the front door's
limit.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCENARIOS = r"""
import dataclasses, json, pathlib, random, sys, tempfile
from importlib.util import find_spec
from lmikit import sim
from lmikit.sim import _loop as loop, _routers as routers

out = {"modules": {m: find_spec(f"lmikit.sim.{m}").origin
                   for m in ("_engine", "_loop", "_routers", "_tiers", "_work")}, "results": []}
modes = ["off", "cpu", "cpu+disk", "remote"]
routings = ["sticky_session", "prefix_aware", "kv_aware", "least_outstanding", "random"]
rag = sim.rag(corpus_chunks=800, chunk_tokens=512, chunks_per_request=4, zipf=1.1,
              output_tokens=128, concurrency=48, requests=900, seed=3)
doc = sim.long_doc_qa(documents=12, document_tokens=9_000, output_tokens=64, concurrency=8)
# long histories at high concurrency
chat = sim.multi_turn_chat(context_tokens=24_000, turns=6, output_tokens=300,
                           concurrency=96, requests=600, think_time_s=2.0)
# a replayed trace (open loop): chunk ids with sessions and prefix ids, and token ids
trace = pathlib.Path(tempfile.mkdtemp()) / "trace.jsonl"
with trace.open("w") as f:
    for i in range(300):
        row = {"arrival_s": i * 0.02, "output_tokens": 20 + i % 50, "session_id": f"u{i % 40}"}
        if i % 3:
            row.update(chunk_ids=[f"doc{i % 7}", i % 11, f"q{i}"], prompt_tokens=900,
                       prefix_id=f"doc{i % 7}")
        else:
            row["prompt_token_ids"] = [i % 5] * 600 + [i] * 100
        f.write(json.dumps(row) + "\n")
replay = sim.load_trace(trace)
small = sim.deployment("Qwen/Qwen3-8B", "ml.g6e.2xlarge", instances=3)
for work in (rag, doc, chat, replay):
    for r in sim.simulate(small, work, routings, modes, seed=5):
        out["results"].append(r.to_dict(with_samples=True))
# the loop itself: exponential think times, a front door that turns requests away, and a
# small pool that preempts; where the loop is Python, count its preemptions
releases = []
def count(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "release":
        releases.append(1)
engine = small.engine
pool = [loop.CopyConfig(engine=engine, gpu_tokens=40_000, chunk_size=256, max_batch_size=32,
                        cpu_tokens=200_000)] * 2
sys.setprofile(count)
res = loop.run(chat, pool, routers.LeastOutstanding(), rng=random.Random(7), max_in_flight=40)
sys.setprofile(None)
out["run"] = dataclasses.asdict(res)
out["releases"] = len(releases)
print(json.dumps(out))
"""


def _simulate(sdk: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(sdk)}
    done = subprocess.run([sys.executable, "-c", SCENARIOS], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def _text(data: object) -> str:
    return json.dumps(data, sort_keys=True)


@pytest.mark.slow
@pytest.mark.timeout(1500 + 2 * 900 + 100)  # its build's and runs' own bounds, not 600 s
def test_the_compiled_simulator_gives_the_pure_python_results(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "sdk", tmp_path / "sdk",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    # what the wheel's build runs: mypyc's C, compiled next to the copied sources
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", "sdk",
         "--build-temp", str(tmp_path / "temp")],
        cwd=tmp_path, capture_output=True, text=True, timeout=1500, check=False)
    assert build.returncode == 0, build.stderr[-4000:]
    assert "not compiling" not in build.stderr, build.stderr[-4000:]

    compiled = _simulate(tmp_path / "sdk")
    pure = _simulate(ROOT / "sdk")
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    assert all(p.endswith(suffixes) for p in compiled["modules"].values()), compiled["modules"]
    assert all(p.endswith(".py") for p in pure["modules"].values()), pure["modules"]
    assert len(pure["results"]) == 4 * 5 * 4
    # as text: floats to the last digit, and NaN (a turned-away request's TTFT) equal to NaN
    assert _text(compiled["results"]) == _text(pure["results"])
    assert _text(compiled["run"]) == _text(pure["run"])
    # the workloads reach what they are here for
    assert any(r["hit_rate"]["remote"] > 0 for r in pure["results"])
    assert any(r["hit_rate"]["disk"] > 0 for r in pure["results"])
    assert any(pure["run"]["failed"])
    assert pure["releases"] > 0  # preempted requests went back to waiting
