"""The simulator's coefficients: what hardware and software achieve, each with its source.

Standard library only. Every default is a public figure (a datasheet, a benchmark log) or a
stated assumption; ``docs/planner-model.md`` cites each one. ``lmikit simulate --calibrate`` and
``lmikit plan --calibrate`` replace them with values fitted to a ``lmikit bench`` result.

>>> c = Coefficients()
>>> c.prefill_mfu, c.cpu_retrieve_efficiency
(0.55, 0.7)
>>> round(c.tokenize_s_per_token * 10_000, 4)  # a 10,000-token prompt
0.0207
>>> Coefficients(prefill_mfu=0.4).prefill_mfu
0.4
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from lmikit import sizing

# Datasheet HBM/GDDR bandwidth per GPU, GB/s (1e9 bytes). Decode reads every weight and the
# whole KV of the batch once per step, so its step time is bounded by this figure.
HBM_GBPS: dict[str, tuple[float, str]] = {
    "NVIDIA A10G": (600.0, "NVIDIA A10 data sheet: 600 GB/s GDDR6"),
    "NVIDIA L4": (300.0, "NVIDIA L4 data sheet: 300 GB/s GDDR6"),
    "NVIDIA L40S": (864.0, "NVIDIA L40S data sheet: 864 GB/s GDDR6"),
    "NVIDIA A100 40GB": (1555.0, "NVIDIA A100 data sheet: 1,555 GB/s HBM2 (40GB SXM)"),
    "NVIDIA A100 80GB": (2039.0, "NVIDIA A100 data sheet: 2,039 GB/s HBM2e (80GB SXM)"),
    "NVIDIA H100 SXM 80GB": (3350.0, "NVIDIA H100 data sheet: 3.35 TB/s HBM3 (SXM)"),
    "NVIDIA H200 141GB": (4800.0, "NVIDIA H200 data sheet: 4.8 TB/s HBM3e"),
    "NVIDIA B200 180GB": (8000.0, "NVIDIA DGX B200 data sheet: 8 TB/s HBM3e per GPU"),
}


# Single-thread encode throughput of HuggingFace ``tokenizers`` (the Rust library behind vLLM's
# fast tokenizers) on the Llama-3.1 tokenizer: 1.93 MB/s on ten short English documents, 2.05
# MB/s on 10,000 and 1.28 MB/s on one 24 MB blob (huggingface/tokenizers pull request #1582,
# "Add benchmark vs tiktoken", July 2024). vLLM tokenizes every prompt in its API server before
# the engine sees it, cached prefix or not.
TOKENIZE_BYTES_PER_S = 1.93e6
TOKEN_BYTES = 4  # English text under a BPE tokenizer (the routers' PrefixLength conversion too)


def hbm_gbps(gpu_name: str) -> float:
    """Datasheet memory bandwidth of a catalog GPU (GB/s)."""
    from lmikit.errors import CatalogError

    try:
        return HBM_GBPS[gpu_name][0]
    except KeyError:
        raise CatalogError(f"no memory bandwidth is known for GPU {gpu_name!r}; known: "
                           + ", ".join(sorted(HBM_GBPS))) from None


@dataclass(frozen=True)
class Coefficients:
    """What the engine and LMCache achieve on top of the hardware's datasheet figures."""

    prefill_mfu: float = sizing.PREFILL_MFU
    request_overhead_s: float = sizing.REQUEST_OVERHEAD_S
    tokenize_s_per_token: float = TOKEN_BYTES / TOKENIZE_BYTES_PER_S
    decode_hbm_efficiency: float = 0.75
    decode_step_overhead_s: float = 0.0007
    tp_decode_step_overhead_s: float = 0.004
    cpu_retrieve_efficiency: float = 0.7
    cpu_store_efficiency: float = 0.7
    disk_read_efficiency: float = 1.0
    remote_gbps: float = 2.0
    remote_rtt_s: float = 0.0002
    lookup_rpc_s: float = 0.00003
    hash_s_per_chunk: float = 0.000003
    prefill_chunk_tokens: int = 8192

    def __post_init__(self) -> None:
        from lmikit.errors import PlanError

        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise PlanError(f"coefficient {f.name} must be a number >= 0 (got {value!r})")
        for name in ("prefill_mfu", "decode_hbm_efficiency", "cpu_retrieve_efficiency",
                     "cpu_store_efficiency", "disk_read_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise PlanError(f"coefficient {name} must be in (0, 1] (got {value!r})")
        if self.remote_gbps <= 0 or self.prefill_chunk_tokens < 1:
            raise PlanError("coefficients remote_gbps and prefill_chunk_tokens must be positive")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def replace(self, **changes: Any) -> Coefficients:
        return Coefficients(**{**self.to_dict(), **changes})


PROVENANCE: dict[str, str] = {
    "prefill_mfu": "share of dense bf16 peak reached by vLLM prefill (compute-bound GEMMs at "
                   "thousands of tokens per pass reach 50-60% MFU); measured with transformers "
                   "for 7-8B models at 4K-32K tokens: 0.52-0.61 on an H100 SXM, 0.54-0.61 on "
                   "an H200; attention over a cached context, vLLM's layer shapes: 0.31-0.41 "
                   "with FlashAttention-2, 0.69-0.77 with cuDNN on an H100 SXM "
                   "(lmikit/sim/calibration)",
    "request_overhead_s": "per request beyond prefill and tokenizing: HTTP, scheduling, "
                          "sampling and streaming the first token; a public vLLM 0.23.0 run "
                          "(Qwen2.5-0.5B-Instruct on one L4, 256-token prompts, concurrency "
                          "1) measured a TTFT p50 of 27.0 ms, 22.1 ms more than this model's "
                          "modelled prefill and tokenizing (ai.wmx.dev 'Benchmark results')",
    "tokenize_s_per_token": "vLLM's API server tokenizing the prompt before the engine sees "
                            "it: 4 bytes per token at 1.93 MB/s, the single-thread encode "
                            "throughput of HuggingFace tokenizers on Llama-3.1's tokenizer "
                            "(huggingface/tokenizers pull request #1582)",
    "decode_hbm_efficiency": "share of datasheet memory bandwidth a decode step reaches "
                             "(weights + KV read once per step); reading 7-8B models' "
                             "weights once in vLLM's fused layout (q/k/v and gate/up "
                             "stacked) measured 0.78-0.80 on an H100 SXM and 0.75-0.79 on "
                             "an H200 at batch 1 (lmikit/sim/calibration)",
    "decode_step_overhead_s": "per decode step of a one-GPU engine beyond its memory pass: "
                              "CPU-side scheduling, sampling and launch (CUDA graphs on); a "
                              "public vLLM 0.23.0 run (Qwen2.5-0.5B-Instruct on one L4, "
                              "concurrency 1) measured 5.1 ms inter-token latency, 0.7 ms "
                              "more than its 0.99 GB of weights at 300 GB/s x "
                              "decode_hbm_efficiency (ai.wmx.dev 'Benchmark results')",
    "tp_decode_step_overhead_s": "the same per decode step of a tensor-parallel engine (TP 2 "
                                 "and above), whose two all-reduces per layer it absorbs: "
                                 "vLLM's custom all-reduce takes 9-45 us a call on H100s by "
                                 "message size and TP degree (sglang pull request #2904), "
                                 "1-4 ms a step at TP 2-4; an effective figure for the "
                                 "tensor-parallel H100 runs of docs/planner.md's accuracy "
                                 "table",
    "cpu_retrieve_efficiency": "LMCache CPU->GPU retrieve over the instance's effective pinned "
                               "host->GPU copy bandwidth: a public LMCache run on a PCIe Gen4 "
                               "host logged 13-22 GB/s store and retrieve (kvgate.vercel.app) "
                               "against ~25 GB/s for a pinned cudaMemcpy",
    "cpu_store_efficiency": "LMCache GPU->CPU store (write-back), same evidence as retrieve",
    "disk_read_efficiency": "share of the catalog's per-drive O_DIRECT read figure that LMCache's "
                            "local-disk backend reaches (the catalog figure is already effective)",
    "remote_gbps": "remote tier read bandwidth per copy, the store's figure "
                   "(lmikit.sim: Redis's by default, as a SageMaker spec's remote "
                   "tier is Redis: 33.5 MB values at 14-16 Gb/s to pipelined "
                   "redis-benchmark clients, LMCache pull request #1238, and 1.4 GB/s "
                   "written by LMCache's connector, issue #1239); HyperPod's tiered storage "
                   "publishes no figure. Calibrate it with lmikit bench",
    "remote_rtt_s": "one round trip to the remote store, the store's figure "
                    "(lmikit.sim: Redis's by default, 'the typical latency of a 1 "
                    "GBits/s network is about 200 us', redis.io 'Diagnosing latency "
                    "issues'); a lookup pays it per chunk checked and a read per chunk and "
                    "request of its connector, as LMCache 0.5.6's connectors send them",
    "lookup_rpc_s": "LMCache's lookup of a new request: one blocking request from vLLM's "
                    "scheduler to the lookup server of every rank at once "
                    "(LMCacheLookupClient.lookup, transport.send_and_recv_all, LMCache "
                    "0.5.6 v1/lookup_client/lmcache_lookup_client.py), before the step; an "
                    "assumption: a Unix-domain-socket round trip, 'as low as 30 us' "
                    "(redis.io 'Diagnosing latency issues')",
    "hash_s_per_chunk": "LMCache hashing one 256-token chunk (ChunkedTokenDatabase."
                        "_hash_tokens: Python's hash of (prefix hash, tuple of the chunk's "
                        "tokens, ()) with vLLM 0.23, which has no 'builtin' hash to give "
                        "it); 3.0 us measured with timeit on CPython 3.11.7, a 2-core "
                        "Intel Xeon VM; paid in the lookup, the retrieve and the store",
    "prefill_chunk_tokens": "vLLM's per-step token budget (max_num_batched_tokens): a long "
                            "prefill runs in steps of this size and decodes advance once per step",
}
