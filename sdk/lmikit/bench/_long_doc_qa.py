"""Long-Doc-QA benchmark: the LMCache method, adapted for SageMaker endpoints.

Documents are ``str(i) + " " + "hi " * length`` (the id keeps one document from being a prefix
of another). Rounds: pre-warmup (short prompts), warmup (each document once: misses that fill
the cache), query (documents again, ordered by ``repeat_mode`` as LMCache's
``benchmarks/long_doc_qa/long_doc_qa.py`` orders them, ``repeat_prompts``: ``tile`` repeats
the whole list, ``interleave`` each document back to back, ``random`` shuffles the repeated
list). Report mean TTFT and round time for warmup against query.

>>> w = LongDocQA(num_documents=3, document_tokens=4, repeat_mode="tile", repeat_count=2)
>>> [d for d, _ in w.query_prompts()]
[0, 1, 2, 0, 1, 2]
>>> [d for d, _ in LongDocQA(num_documents=3, repeat_mode="interleave",
...                          repeat_count=2).query_prompts()]
[0, 0, 1, 1, 2, 2]
>>> w.document(1)
'1 hi hi hi hi '
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from lmikit.errors import BenchStopped, LmikitError

RepeatMode = Literal["tile", "random", "interleave"]


@dataclass(frozen=True)
class Measurement:
    """What one request took: time to first token and to the last, and tokens produced;
    where the server's usage said, its prompt tokens and how many of them were cached
    (``usage.prompt_tokens_details.cached_tokens``)."""

    ttft_s: float
    total_s: float
    output_tokens: int = 0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    excluded: str | None = None  # why its times are no evidence for a fit (None: they are)
    # seconds from the call to send until the request left (opening its session first):
    # its start is that much later than the call's
    sent_after_s: float = 0.0


Send = Callable[[str], Measurement]


@dataclass(frozen=True)
class LongDocQA:
    """The workload. Defaults are the published LMI run: 46 docs x 10,000 tokens.

    ``run_id`` starts every document, so a run's warm-up misses even on an endpoint whose
    caches still hold an earlier run's documents (LMCache keeps them for as long as its tiers
    have room); ``lmikit bench`` draws a new one per run, the default "" sends LMCache's
    exact prompts.
    """

    num_documents: int = 46
    document_tokens: int = 10_000
    output_tokens: int = 100
    repeat_count: int = 1
    repeat_mode: RepeatMode = "tile"
    in_flight: int = 4
    pre_warmup: int = 2
    seed: int = 0
    question: str = "Summarize the document above in one sentence."
    run_id: str = ""

    def __post_init__(self) -> None:
        for name in ("num_documents", "document_tokens", "output_tokens", "repeat_count",
                     "in_flight"):
            if getattr(self, name) < 1:
                raise LmikitError(f"LongDocQA.{name} must be at least 1 "
                                  f"(got {getattr(self, name)})")
        if self.repeat_mode not in ("tile", "random", "interleave"):
            raise LmikitError(f"LongDocQA.repeat_mode must be tile, random or interleave "
                              f"(got {self.repeat_mode!r})")

    def document(self, i: int) -> str:
        return f"{self.run_id}{i} " + "hi " * self.document_tokens

    def prompt(self, i: int) -> str:
        return self.document(i) + "\n\n" + self.question

    def warmup_prompts(self) -> list[tuple[int, str]]:
        return [(i, self.prompt(i)) for i in range(self.num_documents)]

    def query_prompts(self) -> list[tuple[int, str]]:
        docs = list(range(self.num_documents))
        if self.repeat_mode == "tile":  # [0, 1, 2] -> [0, 1, 2, 0, 1, 2]
            order = docs * self.repeat_count
        elif self.repeat_mode == "interleave":  # [0, 1, 2] -> [0, 0, 1, 1, 2, 2]
            order = [d for d in docs for _ in range(self.repeat_count)]
        else:
            order = docs * self.repeat_count
            random.Random(self.seed).shuffle(order)
        return [(d, self.prompt(d)) for d in order]


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a benchmark, after the requests in flight ended; ``rounds`` hold every
    request measured."""

    def __init__(self, rounds: list[RoundResult] | None = None) -> None:
        super().__init__()
        self.rounds = rounds or []


@dataclass
class RoundResult:
    name: str
    requests: int
    round_time_s: float
    ttfts_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    starts_s: list[float] = field(default_factory=list)  # from the benchmark's start
    measurements: list[Measurement] = field(default_factory=list)
    # each measurement's place in the round's prompts (None: 0, 1, 2, ... in order); a
    # round that stopped keeps the requests that ended, wherever they were
    indices: list[int] | None = None
    stopped: str | None = None  # why the round ended early (None: it ran every request)

    def index(self, i: int) -> int:
        """The place in the round's prompts of the ``i``-th measurement."""
        return i if self.indices is None else self.indices[i]

    @property
    def mean_ttft_s(self) -> float:
        return statistics.fmean(self.ttfts_s) if self.ttfts_s else 0.0

    @property
    def p90_ttft_s(self) -> float:
        if len(self.ttfts_s) < 2:
            return self.mean_ttft_s
        return statistics.quantiles(self.ttfts_s, n=10)[-1]

    def summary(self) -> dict[str, Any]:
        return {"round": self.name, "requests": self.requests,
                "round_time_s": round(self.round_time_s, 4),
                "mean_ttft_s": round(self.mean_ttft_s, 4), "p90_ttft_s": round(self.p90_ttft_s, 4),
                "output_tokens": self.output_tokens}


@dataclass
class BenchResult:
    workload: LongDocQA
    rounds: list[RoundResult]

    def round(self, name: str) -> RoundResult:
        return next(r for r in self.rounds if r.name == name)

    @property
    def stopped(self) -> str | None:
        """Why the run ended early (None: every round ran every request)."""
        return next((r.stopped for r in self.rounds if r.stopped), None)

    @property
    def measured(self) -> int:
        return sum(len(r.measurements) for r in self.rounds)

    @property
    def ttft_speedup(self) -> float:
        """Warmup (cache misses) over query (hits) mean TTFT (0 without both rounds)."""
        names = {r.name for r in self.rounds}
        if not {"warmup", "query"} <= names:
            return 0.0
        q = self.round("query").mean_ttft_s
        return self.round("warmup").mean_ttft_s / q if q else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"workload": asdict(self.workload),
                "rounds": [r.summary() for r in self.rounds],
                "ttft_speedup": round(self.ttft_speedup, 3)}


def run_round(name: str, prompts: Iterable[str], send: Send, in_flight: int,
              on_done: Callable[[str, int, Measurement], None] | None = None,
              origin: float | None = None) -> RoundResult:
    """Send prompts with ``in_flight`` requests at a time.

    Each request's start is recorded in seconds from ``origin`` (a ``perf_counter`` value;
    default the round's start), so a bench file can replay the run. A failed request, or
    Ctrl-C, stops the round: the requests not started are cancelled, those in flight end,
    and :class:`~lmikit.errors.BenchStopped` (or :class:`BenchInterrupted`) is raised with
    every request that was measured (``rounds``: this round).
    """
    items = list(prompts)
    start = time.perf_counter()
    origin = start if origin is None else origin
    indices: list[int] = []
    result = RoundResult(name, len(items), 0.0, indices=indices)

    def timed(prompt: str) -> tuple[float, Measurement]:
        began = time.perf_counter() - origin
        m = send(prompt)
        return began + m.sent_after_s, m

    def record(i: int, began: float, m: Measurement) -> None:
        result.ttfts_s.append(m.ttft_s)
        result.output_tokens += m.output_tokens
        result.starts_s.append(began)
        result.measurements.append(m)
        indices.append(i)

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        futures = [pool.submit(timed, p) for p in items]
        i = 0
        try:
            for i, future in enumerate(futures):
                began, m = future.result()
                record(i, began, m)
                if on_done:
                    on_done(name, i, m)
        except BaseException as exc:  # a failed request, or Ctrl-C while waiting
            for f in futures:
                f.cancel()
            wait(futures)
            for j, f in enumerate(futures[i:], start=i):  # those that ended after all
                if not f.cancelled() and f.exception() is None and j not in indices:
                    record(j, *f.result())
            _in_order(result)
            result.round_time_s = time.perf_counter() - start
            raise _stopped(result, exc, i) from exc
    result.round_time_s = time.perf_counter() - start
    return result


def _in_order(result: RoundResult) -> None:
    """Sort a round's measurements by their place in its prompts."""
    order = sorted(range(len(result.measurements)), key=result.index)
    for name in ("ttfts_s", "starts_s", "measurements", "indices"):
        values = getattr(result, name)
        setattr(result, name, [values[k] for k in order])


def _stopped(result: RoundResult, exc: BaseException, at: int
             ) -> BenchStopped | BenchInterrupted:
    """The exception a round that stopped at request ``at`` raises, holding what it
    measured (that round alone; the run adds the rounds before it)."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    result.stopped = "interrupted (Ctrl-C)" if interrupted else \
        f"request {at + 1} of the {result.name} round failed: {exc}"
    if interrupted:
        return BenchInterrupted([result])
    return BenchStopped(f"the bench stopped: {result.stopped}", [result])


def run_long_doc_qa(workload: LongDocQA, send: Send,
                    on_done: Callable[[str, int, Measurement], None] | None = None
                    ) -> BenchResult:
    """Run pre-warmup, warmup and query rounds against ``send``.

    A round that stops (a failed request, Ctrl-C) ends the run: the exception it raises
    (:class:`~lmikit.errors.BenchStopped`, :class:`BenchInterrupted`) carries every round
    measured in ``rounds``, the last one's ``stopped`` saying why.
    """
    rounds: list[RoundResult] = []
    origin = time.perf_counter()
    plan = [("warmup", [p for _, p in workload.warmup_prompts()]),
            ("query", [p for _, p in workload.query_prompts()])]
    if workload.pre_warmup:
        plan.insert(0, ("pre-warmup", [f"Say hello {i}." for i in range(workload.pre_warmup)]))
    for name, prompts in plan:
        try:
            rounds.append(run_round(name, prompts, send, workload.in_flight, on_done, origin))
        except (BenchStopped, BenchInterrupted) as exc:
            exc.rounds = rounds + exc.rounds
            raise
    return BenchResult(workload, rounds)


QUESTION_TOKENS = 12  # the question and separators, as lmikit.sim counts them
PRE_WARMUP_TOKENS = 6


def bench_file(result: BenchResult, *, model: str | None = None, instance: str | None = None,
               tp: int | None = None, chunk_size: int = 256, kv_cache: str | None = None,
               query_outcomes: Sequence[Mapping[str, int]] | None = None,
               copies: int | None = None, adapter: str | None = None) -> dict[str, Any]:
    """The ``lmikit-bench/1`` result file that ``--calibrate`` reads.

    One row per request: round, start (s from the benchmark start), TTFT and total time
    (s from the request's start), prompt tokens, output tokens, and its cache outcome.

    Prompt tokens are the server's ``usage.prompt_tokens`` where its usage chunk came
    (``prompt_source: "measured"``: the chat template's tokens included), else an estimate:
    the document's ``hi`` tokens plus the id and question (``"estimated"``).

    The cache outcome is measured where the server counted the request's cached prompt
    tokens (``usage.prompt_tokens_details.cached_tokens``, which vLLM sends only when
    started with ``--enable-prompt-tokens-details``, LMI does not): ``outcome_source:
    "measured"``, a miss at 0, else a hit of that many tokens, split across tiers as the
    prediction below splits it when the two agree within a chunk, as the GPU pool's where
    the file's ``kv_cache`` is off, else with its tier unknown (``tier: null``). Otherwise it
    is predicted (``"predicted"``): warm-up rows miss (each run's documents are new), the
    i-th query row takes ``query_outcomes[i]`` (its cached tokens per tier; empty: a miss),
    what the deployment's caches should give it
    (:func:`lmikit.sim.expected_outcomes`), or, without them, ``hit: null``
    (unknown, left out of the TTFT fit). A row served by more than one tier keeps every
    tier's share (``cached_by_tier``), which the fit prices tier by tier; ``tier`` names the
    one that served most. A client never sees which tier served a request.
    ``copies``: the model copies that served the run, which the fit replays it on;
    ``adapter``: the LoRA adapter every request went to (None: the base model). A run
    that stopped early (``result.stopped``) is written ``"complete": false`` with the
    reason in ``stopped``; its rows are the requests that were measured.

    >>> w = LongDocQA(num_documents=1, document_tokens=1000, pre_warmup=0)
    >>> r = BenchResult(w, [RoundResult("warmup", 1, 1.0, [0.5], 3, [0.0],
    ...                                 [Measurement(0.5, 0.9, 3)]),
    ...                     RoundResult("query", 1, 1.0, [0.1], 3, [1.0],
    ...                                 [Measurement(0.1, 0.5, 3)])])
    >>> [(x["hit"], x["tier"], x["cached_tokens"], x["cached_by_tier"]) for x in bench_file(
    ...     r, kv_cache="cpu", query_outcomes=[{"gpu": 256, "cpu": 512}])["requests"]]
    [(False, None, None, None), (True, 'cpu', 768, {'gpu': 256, 'cpu': 512})]
    >>> bench_file(r)["requests"][1]["hit"] is None
    True
    """
    # vLLM before its _make_prompt_tokens_details function sent prompt_tokens_details only
    # for a request with cached tokens ("if self.enable_prompt_tokens_details and
    # num_cached_tokens", serving_chat.py chat_completion_stream_generator): where a server
    # counted cached tokens for any request of the run, a usage chunk without them is 0
    counts_cached = any(m.cached_tokens is not None for rnd in result.rounds
                        for m in rnd.measurements)
    rows = []
    for rnd in result.rounds:
        estimate = PRE_WARMUP_TOKENS if rnd.name == "pre-warmup" \
            else result.workload.document_tokens + QUESTION_TOKENS
        for i, (began, m) in enumerate(zip(rnd.starts_s, rnd.measurements, strict=True)):
            predicted: Mapping[str, int] | None = {}
            if rnd.name == "query":
                predicted = query_outcomes[rnd.index(i)] if query_outcomes is not None \
                    else None
            cached = m.cached_tokens
            if cached is None and counts_cached and m.prompt_tokens is not None:
                cached = 0
            prompt = m.prompt_tokens or estimate
            rows.append({"round": rnd.name, "start_s": round(began, 6),
                         "ttft_s": round(m.ttft_s, 6), "total_s": round(m.total_s, 6),
                         "prompt_tokens": prompt, "output_tokens": max(1, m.output_tokens),
                         "prompt_source": "measured" if m.prompt_tokens else "estimated",
                         "excluded": m.excluded,
                         **_cache_fields(cached, predicted, prompt, kv_cache, chunk_size)})
    return {"format": "lmikit-bench/1", "model": model, "instance": instance, "tp": tp,
            "chunk_size": chunk_size, "kv_cache": kv_cache, "copies": copies,
            "adapter": adapter, "complete": result.stopped is None, "stopped": result.stopped,
            "workload": asdict(result.workload), "requests": rows}


def _cache_fields(cached: int | None, predicted: Mapping[str, int] | None, prompt: int,
                  kv_cache: str | None, chunk_size: int) -> dict[str, Any]:
    """A row's cache fields: from the server's count of cached tokens where it sent one
    (``measured``), else from the prediction (``predicted``, at most the prompt less one
    token: vLLM computes the last), else unknown."""
    from lmikit.sim import capped, measured_outcome, outcome_fields

    if cached is not None:
        by_tier = measured_outcome(cached, predicted, kv_cache, chunk_size)
        fields = outcome_fields(by_tier) if by_tier is not None else {
            "hit": True, "tier": None, "cached_tokens": cached, "cached_by_tier": None}
        return {**fields, "cached_tokens": cached, "outcome_source": "measured"}
    if predicted is None:
        return {**outcome_fields({}), "hit": None, "outcome_source": None}
    return {**outcome_fields(dict(capped(tuple(predicted.items()), prompt - 1))),
            "outcome_source": "predicted"}
