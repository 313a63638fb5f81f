"""Per-chunk cost of the streaming output-formatter path (target: under 5 us per chunk).

Runs 100,000 synthetic SSE chunks, shaped as vLLM serializes ChatCompletionStreamResponse,
through formatters as the generated model.py wires them (lmikit's guard around the user's
function) and reports microseconds per chunk for each path:

- guard + passthrough: the floor every custom formatter pays;
- strip_reasoning: the common case (no reasoning in flight) takes the no-parse fast path;
- add_request_metadata: touches only the final chunk;
- add_usage_metrics: stateful (per-stream counter); parses only each stream's final chunk.

    python benchmarks/formatter_overhead.py [--chunks 100000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from lmikit.formatters import (
    add_request_metadata,
    add_usage_metrics,
    output_formatter,
    strip_reasoning,
)

TARGET_US = 5.0


def synthetic_chunks(n: int, streams: int = 8, per_stream: int = 200) -> list[str]:
    chunks = []
    for i in range(n):
        stream, pos = i % streams, (i // streams) % per_stream
        event = {"id": f"chatcmpl-{stream}-{i // (streams * per_stream)}",
                 "object": "chat.completion.chunk", "created": 1_700_000_000,
                 "model": "Qwen/Qwen3-8B",
                 "choices": [{"index": 0, "delta": {"content": f" token{pos}"}, "logprobs": None,
                              "finish_reason": "stop" if pos == per_stream - 1 else None}],
                 "usage": None}
        chunks.append("data: " + json.dumps(event, separators=(",", ":")) + "\n\n")
    chunks.append("data: [DONE]\n\n")
    return chunks


def per_chunk_us(fmt: Callable[[str], str], chunks: list[str], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for chunk in chunks:
            fmt(chunk)
        best = min(best, time.perf_counter() - start)
    return best / len(chunks) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    args = parser.parse_args()
    chunks = synthetic_chunks(args.chunks)

    def passthrough(output: str) -> str:
        return output

    paths = {
        "guard + passthrough": output_formatter(passthrough),
        "guard + strip_reasoning": output_formatter(strip_reasoning()),
        "guard + add_request_metadata": output_formatter(add_request_metadata()),
        "guard + add_usage_metrics": output_formatter(add_usage_metrics()),
    }
    print(f"{len(chunks):,} chunks; target {TARGET_US} us/chunk")
    worst = 0.0
    for name, fmt in paths.items():
        us = per_chunk_us(fmt, chunks)
        worst = max(worst, us)
        print(f"  {name:32s} {us:6.2f} us/chunk  {'ok' if us < TARGET_US else 'OVER'}")
    return 0 if worst < TARGET_US else 1


if __name__ == "__main__":
    raise SystemExit(main())
