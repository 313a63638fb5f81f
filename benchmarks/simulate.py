"""Simulator speed: 10,000 requests on 8 copies, 5 routings x 3 KV-cache modes, one core.

Target: the 15 scenarios (150,000 simulated requests) in under 10 s. Prints requests
simulated per second. The workload is RAG (Zipf-popular corpus chunks behind a shared
system prompt) on Qwen3-8B, one copy per ml.g6e.2xlarge.

It times the lmikit it imports and says which build that is. A wheel or ``pip install .``
compiles the event loop with mypyc (``setup.py``); the editable install of a checkout is
pure Python and about twice as slow. To time what users install, from a checkout:

    pip install --no-deps --target build/wheel-install .
    PYTHONPATH=build/wheel-install python benchmarks/simulate.py

    python benchmarks/simulate.py   # the editable install: pure Python
"""

from __future__ import annotations

import platform
import sys
import time
from importlib.util import find_spec

from tokenize_prompts import cpu_name

from lmikit import sim

REQUESTS = 10_000
INSTANCES = 8
ROUTINGS = ["sticky_session", "prefix_aware", "kv_aware", "least_outstanding", "random"]
MODES = ["off", "cpu", "cpu+disk"]
TARGET_S = 10.0


def main() -> int:
    dep = sim.deployment("Qwen/Qwen3-8B", "ml.g6e.2xlarge", instances=INSTANCES)
    work = sim.rag(corpus_chunks=5_000, chunk_tokens=512, chunks_per_request=4, zipf=1.1,
                   output_tokens=128, concurrency=16 * INSTANCES, requests=REQUESTS, seed=0)
    start = time.perf_counter()
    results = sim.simulate(dep, work, ROUTINGS, MODES, seed=0)
    elapsed = time.perf_counter() - start
    simulated = REQUESTS * len(results)
    print(f"{'routing':18s} {'kv_cache':9s} {'p50 s':>8s} {'p90 s':>8s} {'miss':>6s}")
    for r in results:
        print(f"{r.routing:18s} {r.kv_cache:9s} {r.ttft_p50_s:8.3f} {r.ttft_p90_s:8.3f} "
              f"{r.hit_rate['miss']:6.2f}")
    verdict = "ok" if elapsed < TARGET_S else "SLOW"
    loop = str(find_spec("lmikit.sim._loop").origin)
    build = "pure Python" if loop.endswith(".py") else "compiled with mypyc"
    print(f"CPU: {cpu_name()}; Python {platform.python_version()}; lmikit.sim {build} ({loop})")
    print(f"{len(results)} scenarios, {simulated:,} requests in {elapsed:.2f} s "
          f"({simulated / elapsed:,.0f} requests/s; target < {TARGET_S:g} s) {verdict}")
    return 0 if elapsed < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
