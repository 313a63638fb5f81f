"""llm-d's code-generation workload through a Kubernetes Service, rebuilt from its configuration.

llm-d's blog "Sticky Until Saturated: Token-Aware Routing in llm-d" (2026-08-17,
llm-d/llm-d.github.io ``blog/2026-08-17_sticky-until-saturated-token-aware-routing.mdx``) ran
its prefill-bound "code-generation" workload on 10 Qwen3-32B vLLM servers of TP 2 on H100
(``max-num-batched-tokens`` 8192) behind five routers. The table is llm-d/llm-d
``llm-d-benchmarking/workloads/code-generation/analysis/results.txt`` at 7c4b49aa (the runs
named ``...-final`` in ``analysis.py`` beside it; the "16k in_t/s" of the blog's summary at
the k8 knee, conc=30, is this table's 16,269.1: the older table at 06d672f7 is another set
of runs, without streaming). ``run_benchmark.sh`` at 7c4b49aa sets, per concurrency ``c``
of 10..100: SEED = NUM_CONVERSATIONS = ``c``, MAX_REQUESTS = ``6c``, ``stream=true``, and
for the "k8" arm the Service's URL ("direct vLLM, bypasses EPP"); ``code-generation.yaml``
at 7c4b49aa is ``concurrent`` load, 6 workers, ``request_timeout`` 300 s, ``ignore_eos``,
and the conversation_replay data below. ``bench-job.yaml`` at 7c4b49aa runs inference-perf at
3c7c4a3 (2026-05-05), read here (kubernetes-sigs/inference-perf):

- ``datagen/conversation_replay_datagen.py``, ``_build_conversations``: one
  ``np.random.default_rng(seed)`` draws, in this order, the turn counts (normal 6 +- 3.5,
  clipped to 2..20), the per-conversation prompt lengths (uniform 15,000..100,000), the
  3,000 shared-prompt token ids (``rng.integers(0, vocab_size)``), then every turn's input
  length (lognormal, mean 1,500, sd 1,200, 100..10,000) and output length (lognormal, mean
  800, sd 600, 50..4,000); ``utils/distribution.py``, ``sample_from_distribution`` (the
  uniform draws up to ``max + 1``; values clipped and rounded). These draws are replayed
  here exactly (:func:`conversations`; ``vocab_size`` 151,643, Qwen3's tokenizer without its
  added tokens). The system prompt is the shared 3,000 tokens + the conversation's own.
- ``load_lazy_data``: request ``i`` is conversation ``i % c``'s round ``i // c``; round
  ``r`` sends turn ``r % turns``; when ``r`` reaches the conversation's turn count the slot
  starts the same conversation again from a fresh context (same system prompt, same turns).
- ``apis/user_session.py``: a turn sends the session's context + " " + its prompt and
  waits for the previous turn (a per-session lock). With ``streaming`` on, the completion
  handler (``apis/completion.py``, ``process_response``) never sets ``model_response``, so
  the context grows by the user prompts only: turn ``k`` (from 0) sends the system prompt
  and prompts 0..k, not the answers.
- Prompts are random token ids decoded to text, which vLLM re-tokenizes. Re-tokenizing
  decoded random Qwen ids gives 1.052 tokens per id (measured, not published: Qwen's
  151,643-token BPE ranks as shipped in the ``dashscope`` 2.0.2 wheel, its split pattern
  and NFC, on 20,000-60,000-id prompts); ``llmd.RETOKENIZE`` scales every segment by it
  (:func:`tokens`). The report counts prompt tokens with the same tokenizer (``process_response``:
  ``tokenizer.count_tokens(self.prompt)``), so the two agree; it cuts a count at the
  tokenizer's ``model_max_length``, which no replayed prompt (at most ~120,000) reaches.
- ``loadgen/load_generator.py``: ``concurrent`` puts all ``6c`` requests on the queues
  within the first second (``main.py`` sets rate = num_requests, duration 1); request ``i``
  goes to worker ``(i % c) % 6``, whose semaphore allows ``c // 6`` (+1) in flight, the
  number of conversations it owns. Modelled as ``c`` users each replaying its conversation
  slot's 6 rounds back to back (a closed-loop phase of concurrency ``c``).
- ``client/modelserver/openai_client.py``: aiohttp ``ClientTimeout(total=300)``; a request
  that runs past it fails (error ``TimeoutError``), its session keeps its old context.
- ``reportgen/base.py``, ``summarize_requests``: over the stage's requests, time = last end -
  first start (failed ones included, ending at their timeout); in_t/s and out_t/s = the
  successful requests' prompt and output tokens over that time; TTFT = first streamed token
  - send.

Rows, by one rule: the k8 section's in_t/s, out_t/s and (client-side) TTFT p90 at every
concurrency, 10 to 100. Left out: the vLLM-side columns (Prometheus histograms, not rebuilt),
kv_mean, prefix%, the queue columns and the other percentiles.

Checked against the source beyond the rows (``test_llmd_codegen.py``): the older table at
06d672f7 (runs of the same seeds without streaming, so with the answers in the context)
publishes each run's median prompt length; the replayed prompts, answers added, match it
within 3% at every concurrency (0.1-2.7%).

Where the rows depart from the generator, each said here, the same for every row:

- Routing. kube-proxy sends each new *connection* to a random endpoint, and inference-perf
  at 3c7c4a3 reuses connections: one aiohttp ``ClientSession`` per worker process
  (``openAIModelServerClient.process_request`` creates it once) over a keep-alive
  ``TCPConnector``. A worker's connections pass from one of its conversations to another (a
  freed slot takes the next queued turn, not the finished conversation's), so routing is
  neither per request nor per conversation. How the rows route is a choice the accuracy fit
  makes (``variant.CHOICES["codegen_routing"]``), each figure the median over seven draws
  (``llmd.ROUTER_SEEDS``): per connection as the client's source implies (the default,
  :func:`connection_replay`), or random per request (``RandomRouter``), which the table's
  prefix% favours: 36.3%, 23.0%, 9.5% at conc 10, 20, 30 and 5-6% from 60 on. Over the seven
  draws the share of prompt tokens the servers' prefix caches serve is 20-33%, 18-25%,
  14-26% and 13-17% (at 60) with random routing per request. Routed per connection as the
  client's source implies (:func:`connection_replay`: each worker's permits, its
  conversations' session locks, its keep-alive connections reused oldest first and closed
  after vLLM's 5 s), it is 62-68%, 41-60%, 34-49% and 19-21%: at conc 10 and 30 every draw
  is above any per-request draw and above 1.5x the published rate, and the draws' median
  lies more than twice as far from it as the per-request median (``test_llmd_codegen.py``).
  The run did not reuse connections as that source implies, for a reason we have not found;
  at conc 10 and 20 it was stickier than per-request routing (36.3% and 23.0% against
  medians of 24% and 21%).
- Client coupling. A worker's semaphore admits ``c // 6`` (+1) queued requests, and a
  turn holds its slot while it waits for its conversation's previous turn, so a
  conversation can stall behind another of its worker; a slot's restarted conversation
  does not wait for its previous one. :func:`connection_replay` models both; routed per
  request, each slot replays its rounds as an independent user.
- Timeouts. A request past 300 s counts as failed, as in the report, but the simulated
  server goes on serving it (vLLM aborts a request whose client has gone) and its session's
  next turn still carries its prompt. The simulation fails 0-6.5% of requests (medians over
  the draws; 6.5% at conc 100), the table 0-2.8%.
- The loop keeps a turn's full output chunks cached when the session's next turn starts
  with the same prompt, which this client's next turn (no answers) does not repeat: at most
  ~800 tokens of a ~70,000-token prompt, on one server in ten.
- The first ``c`` requests start together, not spread over the first second.

The servers: the Deployment committed with these workload files (llm-d/llm-d
``guides/optimized-baseline/modelserver/gpu/vllm/vllm-deployment.yaml`` at ae9f98f1, the
commit of ``reasoning.yaml``: 10 replicas of Qwen3-32B at TP 2, labelled
``optimized-baseline`` like the runs' Service ``optimized-baseline-vllm-lb``), image
``vllm/vllm-openai:v0.19.1`` (so ``reserve_full_prompt=True``), ``--max-model-len=131072``
with YaRN rope scaling, and vLLM's defaults otherwise (memory share 0.9, 8,192-token step
budget on H100, 16-token blocks, replayed at 64). The pool per pod is the accuracy fit's
choice (``llmd_service.pool_2026``: lmikit's planner's by default, or the one published for
Qwen3-32B at TP 2 on H100 at that memory share, 307,328 tokens, 5.6% less). Assumed:
outputs are exactly ``max_tokens`` long (``ignore_eos``) and counted as vLLM counts them (the report
re-tokenizes each streamed chunk's text with the served model's tokenizer and sums the
counts: ``reportgen/base.py``, ``summarize_requests``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from lmikit.sim._loop import CopyConfig, RunResult, run
from lmikit.sim._routers import RandomRouter
from lmikit.sim._scenario import percentile
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import llmd, variant
from tests.unit.sim.inference_perf import (
    QWEN3_VOCAB,
    KeepAliveService,
    clip_round,
    concurrent_load,
    lognormal,
    successes_and_span,
)
from tests.unit.sim.llmd_service import pool_2026
from tests.unit.sim.rows import Row

SOURCE = ("llm-d blog 'Sticky Until Saturated: Token-Aware Routing in llm-d' (2026-08-17) and "
          "its table, llm-d/llm-d llm-d-benchmarking/workloads/code-generation/analysis/"
          "results.txt at 7c4b49aa, section 'k8' (Kubernetes Service): Qwen3-32B on 10 vLLM "
          "pods x 2 H100, inference-perf 3c7c4a3 conversation_replay (code-generation.yaml), "
          "concurrent load, seed = conversations = conc, 6 x conc requests, streaming")

PODS = 10
WORKERS = 6  # code-generation.yaml load.num_workers
ROUNDS = 6  # run_benchmark.sh: TURNS_PER_CONV; MAX_REQUESTS = NUM_CONVERSATIONS x 6
TIMEOUT_S = 300.0  # code-generation.yaml load.request_timeout
SHARED = 3_000  # shared_system_prompt_len

# results.txt at 7c4b49aa, section "k8": concurrency -> (out_t/s, in_t/s, TTFT p90 s)
PUBLISHED = {10: (117.5, 15168.5, 25.7), 20: (299.9, 29451.3, 14.2),
             30: (353.3, 16269.1, 74.4), 40: (292.7, 26357.3, 70.4),
             50: (394.7, 34551.8, 63.6), 60: (402.0, 22124.5, 148.5),
             70: (715.6, 32786.2, 136.2), 80: (862.0, 40560.2, 108.3),
             90: (615.1, 34526.3, 162.0), 100: (548.1, 37699.2, 175.1)}


@dataclass(frozen=True)
class Conversation:
    turns: int
    system: int  # its own part of the system prompt, after the shared 3,000 ids
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def conversations(seed: int, n: int) -> list[Conversation]:
    """The blueprints ``_build_conversations`` draws for ``seed`` (lengths in token ids).

    >>> [c.turns for c in conversations(10, 10)]
    [2, 3, 3, 7, 5, 6, 9, 9, 8, 4]
    """
    rng = np.random.default_rng(seed)
    turns = clip_round(rng.normal(loc=6, scale=3.5, size=n), 2, 20)
    system = clip_round(rng.uniform(low=15_000, high=100_001, size=n), 15_000, 100_000)
    rng.integers(0, QWEN3_VOCAB, size=SHARED)  # the shared prompt's ids, drawn before the turns
    total = sum(turns)
    inputs = lognormal(rng, 1_500, 1_200, 100, 10_000, total)
    outputs = lognormal(rng, 800, 600, 50, 4_000, total)
    out, k = [], 0
    for t, s in zip(turns, system, strict=True):
        out.append(Conversation(t, s, tuple(inputs[k:k + t]), tuple(outputs[k:k + t])))
        k += t
    return out


def tokens(ids: int) -> int:
    """Tokens vLLM sees for ``ids`` random ids decoded to text."""
    return llmd.reencoded(ids, "Qwen/Qwen3-32B")


def workload(conc: int) -> Workload:
    """Each conversation slot's 6 rounds, as one closed-loop user's session.

    Round ``r`` sends turn ``r % turns``: the system prompt and the prompts of turns 0..that
    one (a restarted conversation sends round 0's prompt again).
    """
    sessions, rid = [], 0
    for j, conv in enumerate(conversations(conc, conc)):
        rounds = []
        for r in range(ROUNDS):
            turn = r % conv.turns
            segments = [(1, tokens(SHARED)), (10_000 + j, tokens(conv.system))]
            segments += [(1_000_000 + 100 * j + t, tokens(conv.inputs[t]))
                         for t in range(turn + 1)]
            rounds.append(Request(rid, chunk_keys(segments, llmd.BLOCK),
                                  sum(n for _, n in segments), conv.outputs[turn], session=j))
            rid += 1
        sessions.append(rounds)
    return Workload("inference-perf conversation_replay", [Phase("stage 0", sessions, conc)],
                    llmd.BLOCK)


@dataclass(frozen=True)
class Report:
    in_tokens_s: float
    out_tokens_s: float
    ttft_p90_s: float
    success: float  # share of requests that ended within the timeout
    prefix_hit: float  # share of the stage's prompt tokens the servers' prefix caches served


def report(reqs: Sequence[Request], out: RunResult) -> Report:
    """inference-perf's ``summarize_requests`` over the stage, with its 300 s timeout.

    A request past the timeout fails: its tokens and latencies leave the figures, and it
    ends, for the run's span, at its send + 300 s.
    """
    failed = {r.id for r in reqs if out.end[r.id] - out.arrival[r.id] > TIMEOUT_S}
    ok, span = successes_and_span(reqs, out, failed, TIMEOUT_S)
    ttfts = sorted(out.ttft[r.id] - out.arrival[r.id] for r in ok)
    return Report(sum(r.prompt_tokens for r in ok) / span,
                  sum(r.output_tokens for r in ok) / span,
                  percentile(ttfts, 0.9), len(ok) / len(reqs),
                  sum(out.served["gpu"][r.id] for r in reqs) / sum(r.prompt_tokens for r in reqs))


def copies(pool_tokens: int | None = llmd.QWEN3_32B_TP2_POOL) -> list[CopyConfig]:
    """The Deployment's 10 servers (vLLM v0.19.1's defaults); ``pool_tokens`` per pod (the
    default: the one published for Qwen3-32B at TP 2 on H100 at memory share 0.9,
    :data:`llmd.QWEN3_32B_TP2_POOL`; None: the planner's)."""
    return llmd.copies(replace(llmd.X73, pods=PODS), reserve_full_prompt=True,
                       pool_tokens=pool_tokens)


def replay(conc: int, seed: int, pool_tokens: int | None = llmd.QWEN3_32B_TP2_POOL) -> Report:
    """The run at ``conc`` with random routing drawn from ``seed``."""
    work = workload(conc)
    out = run(work, copies(pool_tokens), RandomRouter(random.Random(seed)))
    return report(work.requests, out)


def connection_replay(conc: int, seed: int,
                      pool_tokens: int | None = llmd.QWEN3_32B_TP2_POOL) -> Report:
    """The run at ``conc`` routed per connection as the client's source implies.

    Each worker takes its channel's requests under its permits and its conversations'
    session locks (a restarted conversation is a new session), and sends them over its own
    keep-alive connections (:mod:`tests.unit.sim.inference_perf`). Not used for the rows:
    see the module's notes on routing.
    """
    work = workload(conc)
    slots = work.phases[0].sessions
    turns = [c.turns for c in conversations(conc, conc)]
    # the generator's order: request i is slot i % conc's round i // conc
    ordered = [slots[i % conc][i // conc] for i in range(ROUNDS * conc)]
    load = concurrent_load(ordered, conc, WORKERS,
                           lambda i, r: (i % conc, (i // conc) // turns[i % conc]))
    work = Workload(work.name, [Phase("stage 0", slots, conc, dispatcher=load)], work.chunk_size)
    svc = KeepAliveService(random.Random(seed), workers=WORKERS, worker_of=load.worker_of)
    return report(work.requests, run(work, copies(pool_tokens), svc))


@variant.cached
def result(conc: int, pool_tokens: int | None = llmd.QWEN3_32B_TP2_POOL,
           per_connection: bool = False) -> Report:
    """Each figure's median over :data:`llmd.ROUTER_SEEDS`, routed per request (or per
    connection, :func:`connection_replay`)."""
    one = connection_replay if per_connection else replay
    return llmd.median_stats([one(conc, seed, pool_tokens) for seed in llmd.ROUTER_SEEDS])


FIGURES = {"in_t/s": ("in_tokens_s", 1, "tok/s"), "out_t/s": ("out_tokens_s", 0, "tok/s"),
           "ttft p90": ("ttft_p90_s", 2, "s")}


def _figure(conc: int, attr: str) -> float:
    """A figure under the current model variant's choices: the 2026 servers' pool
    (``llmd_2026_pool``) and how the Service routes (``codegen_routing``)."""
    per_connection = variant.current().choice("codegen_routing") == "per-connection"
    return float(getattr(result(conc, pool_2026(), per_connection), attr))


def rows() -> list[Row]:
    """in_t/s, out_t/s and TTFT p90 at every concurrency: one sweep, one setup, cache-blind
    (a Service), its TTFTs misses."""
    return [Row(f"llm-d code-generation k8s Service, conc {conc}: {label}", SOURCE,
                values[col], unit, partial(_figure, conc, attr),
                "throughput" if unit == "tok/s" else "ttft_miss", "cache_blind",
                "llmd-sticky-2026", "llmd-codegen", f"codegen/conc{conc}")
            for conc, values in PUBLISHED.items()
            for label, (attr, col, unit) in FIGURES.items()]
