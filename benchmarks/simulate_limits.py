"""The simulator at its input bounds: time and peak memory, each case in its own interpreter.

What it measures, and how to run it: docs/planner-model.md,
"What benchmarks/simulate_limits.py measures".
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from lmikit import sim
    from lmikit.errors import LmikitError
    from lmikit.sim import _calibrate as calibrate, _workloads as w
    case, folder = sys.argv[1], sys.argv[2]
    dep = sim.deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge", instances=8)
    window = dep.max_model_len

    def call():
        if case == "refuse: 10^8 documents":
            w.long_doc_qa(10**8, 10_000, 100, 4, context_window=window)
        elif case == "refuse: 10^11-token document":
            w.long_doc_qa(46, 10**11, 100, 4, context_window=window)
        elif case == "refuse: 10^8-chunk corpus":
            w.rag(10**8, 512, 4, 1.0, 100, 4, context_window=window)
        elif case == "rag: whole Zipf-10 corpus per request":
            work = w.rag(1_000, 8, 1_000, 10.0, 100, 4, requests=100, context_window=window)
            return f"{len(work.requests)} requests of 1,000 chunks"
        elif case == "rag: 40,000 of a 10^6-chunk Zipf-10 corpus":
            work = w.rag(10**6, 1, 40_000, 10.0, 1, 4, requests=8, context_window=window)
            return f"{len(work.requests)} requests of 40,000 chunks"
        elif case == "long-doc-qa at the bounds, 1 scenario":
            docs, tokens = w.MAX_REQUESTS // 2, 50 * 256 - w.QUESTION_TOKENS
            work = w.long_doc_qa(docs, tokens, 16, 64, context_window=window)
            (r,) = sim.simulate(dep, work, ["kv_aware"], ["cpu"])
            return f"{r.requests:,} measured, p50 TTFT {r.ttft_p50_s:.3f} s"
        elif case.startswith("512 copies, kv_aware, 100,000 "):
            many = sim.deployment("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.2xlarge", instances=512)
            if case.endswith("chat"):
                work = w.multi_turn_chat(8_000, 8, 100, 512, requests=w.MAX_REQUESTS,
                                         context_window=many.max_model_len)
            else:
                work = w.rag(1_000, 512, 4, 1.0, 100, 512, requests=w.MAX_REQUESTS,
                             context_window=many.max_model_len)
            (r,) = sim.simulate(many, work, ["kv_aware"], ["cpu"])
            return f"{r.requests:,} measured, p50 TTFT {r.ttft_p50_s:.3f} s"
        elif case == "repeated text at the chunk bound (notes)":
            from lmikit.sim._scenario import repeated_tokens
            docs, tokens = w.MAX_REQUESTS // 2, 50 * 256 - w.QUESTION_TOKENS
            work = w.long_doc_qa(docs, tokens, 16, 64, context_window=window)
            start = time.perf_counter()
            repeated = repeated_tokens(work)
            return f"{repeated:,} tokens repeated", time.perf_counter() - start
        elif case == "trace of 100,000 requests, loaded":
            path = folder + "/trace.jsonl"
            with open(path, "w") as f:
                for i in range(w.MAX_REQUESTS):
                    f.write(json.dumps({"arrival_s": i / 100, "output_tokens": 16,
                                        "chunk_ids": [i % 97] + [i] * 49}) + "\\n")
            start = time.perf_counter()
            work = w.load_trace(path, context_window=window)
            return f"{len(work.requests):,} requests", time.perf_counter() - start
        elif case == "fit on 1,000 bench requests":
            one = sim.deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
            bench = calibrate.synthetic_bench(one, w.long_doc_qa(500, 4_000, 16, 4), "cpu")
            replays = [0]
            start = time.perf_counter()
            calibrate.fit(one, bench, progress=lambda done, _: replays.__setitem__(0, done))
            took = time.perf_counter() - start
            scale = calibrate.MAX_BENCH_REQUESTS / len(bench.records)
            worst = took * scale * calibrate.MAX_EVALUATIONS / replays[0]
            return (f"{replays[0]:,} replays; projects to {took * scale:,.0f} s at "
                    f"{calibrate.MAX_BENCH_REQUESTS:,} requests, {worst:,.0f} s with "
                    f"{calibrate.MAX_EVALUATIONS:,} replays"), took
        elif case == "fit on 5,000 x 120,000-token bench requests":
            big = sim.deployment("meta-llama/Llama-3.1-8B-Instruct", "ml.p4de.24xlarge")
            rows = [{"round": "warmup", "start_s": i * 0.01, "ttft_s": 1.0 + (i % 7) * 0.1,
                     "total_s": 2.0 + (i % 5) * 0.1, "prompt_tokens": 120_000,
                     "output_tokens": 16, "hit": bool(i % 2),
                     **({"tier": "cpu"} if i % 2 else {})} for i in range(5_000)]
            bench = calibrate.bench_from_dict({
                "format": calibrate.FORMAT, "model": big.model_id,
                "instance": big.instance_type, "tp": 1, "kv_cache": "cpu", "copies": 1,
                "requests": rows})
            replays = [0]
            start = time.perf_counter()
            result = calibrate.fit(big, bench,
                                   progress=lambda done, _: replays.__setitem__(0, done))
            took = time.perf_counter() - start
            return (f"{replays[0]:,} replays, bound {calibrate.MAX_FIT_SECONDS:,.0f} s; "
                    f"{len(result.notes)} notes"), took
        return "built"

    start = time.perf_counter()
    try:
        out = call()
    except LmikitError as exc:
        out = "refused: " + str(exc)[:60]
    took = time.perf_counter() - start
    if isinstance(out, tuple):
        out, took = out
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"s": took, "mb": peak_mb, "outcome": out}))
""")

CASES = ["refuse: 10^8 documents", "refuse: 10^11-token document", "refuse: 10^8-chunk corpus",
         "rag: whole Zipf-10 corpus per request", "rag: 40,000 of a 10^6-chunk Zipf-10 corpus",
         "long-doc-qa at the bounds, 1 scenario", "512 copies, kv_aware, 100,000 chat",
         "512 copies, kv_aware, 100,000 rag",
         "repeated text at the chunk bound (notes)", "trace of 100,000 requests, loaded",
         "fit on 1,000 bench requests", "fit on 5,000 x 120,000-token bench requests"]


def main() -> int:
    print(f"{'case':42s} {'seconds':>8s} {'peak MB':>8s}  outcome")
    with tempfile.TemporaryDirectory() as folder:
        for case in CASES:
            done = subprocess.run([sys.executable, "-c", CHILD, case, folder], check=True,
                                  capture_output=True, text=True)
            row = json.loads(done.stdout.splitlines()[-1])
            print(f"{case:42s} {row['s']:8.2f} {row['mb']:8.0f}  {row['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
