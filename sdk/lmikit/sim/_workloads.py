"""Workloads: what users send, as phases of sessions of requests.

A phase is closed-loop (``concurrency`` users; each takes the next session from a shared
queue, sends its turns one after the other with ``think_time_s`` between them, then takes the
next session) or open-loop (every request carries its own arrival time, as a replayed
trace). Phases run one after the other; only requests of ``measured`` phases are reported.

- :func:`long_doc_qa`: LMCache's Long-Doc-QA (documents ``str(i) + " " + "hi " * n``, a
  warm-up round that sends each document once, then a query round that sends each again).
- :func:`multi_turn_chat`: sessions whose history grows turn by turn to ``context_tokens``.
- :func:`rag`: a corpus of chunks with Zipf popularity, ``k`` retrieved chunks per request.
- :func:`load_trace`: JSON lines with arrival time, prompt token ids or chunk ids, output
  tokens and session id.

Every builder refuses, before it builds anything, a workload the simulator could not run in
bounded time and memory, naming the flag, its value and what is valid: a request whose
prompt plus output exceeds the model's context window (``context_window``: vLLM refuses it
with a 400), more than :data:`MAX_REQUESTS` requests, more than :data:`MAX_PROMPT_CHUNKS`
full chunks over every prompt, or a number that is not finite.

>>> w = long_doc_qa(documents=3, document_tokens=1000, output_tokens=10, concurrency=2,
...                 chunk_size=256)
>>> [(p.name, len(p.sessions), p.measured) for p in w.phases]
[('warmup', 3, False), ('query', 3, True)]
>>> w.phases[0].sessions[0][0].keys == w.phases[1].sessions[0][0].keys
True
"""

from __future__ import annotations

import bisect
import io
import itertools
import json
import math
import numbers
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmikit._files import FileRefused, read_limited
from lmikit.errors import SimulationError, safe_repr
from lmikit.sim._tiers import chunk_keys, id_chunk_keys, stable_id, token_chunk_keys
from lmikit.sim._work import Dispatcher, Phase, Request, Workload

QUESTION_TOKENS = 12  # "Summarize the document above in one sentence." plus separators

# Bounds on one workload. The speed benchmark (benchmarks/simulate.py) runs 10,000 requests;
# benchmarks/simulate_limits.py builds and runs a workload at these bounds and prints its
# time and peak memory.
MAX_REQUESTS = 100_000
MAX_PROMPT_CHUNKS = 5_000_000  # full chunks of every prompt together: their keys are held
MAX_REQUEST_TOKENS = 1 << 24  # prompt + output of one request when no context window is given
MAX_CORPUS_CHUNKS = 1_000_000
MAX_ZIPF = 10.0
MAX_TRACE_BYTES = 128 * 1024**2
# the latest arrival the simulator takes (30 days): its clock is a float, and far enough out
# (~4e12 s) a millisecond step no longer moves it, so a run would never end
MAX_ARRIVAL_S = 30 * 86_400.0


WorkloadError = SimulationError
# Request, Phase, Workload and Dispatcher are defined in lmikit.sim._work (compiled in a
# wheel) and are part of this module's interface too
__all__ = [
    "MAX_ARRIVAL_S", "MAX_CORPUS_CHUNKS", "MAX_PROMPT_CHUNKS", "MAX_REQUESTS",
    "MAX_REQUEST_TOKENS", "MAX_TRACE_BYTES", "MAX_ZIPF", "QUESTION_TOKENS", "Dispatcher", "Phase",
    "Request", "Workload", "WorkloadError", "finite", "load_trace", "long_doc_qa",
    "multi_turn_chat", "rag",
]


def _whole(low: int, **values: Any) -> list[int]:
    """``values`` as ints, in order, each a whole number of at least ``low`` (of any integer
    type, numpy's too, not a bool), else a WorkloadError naming the first that is not."""
    out: list[int] = []
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise WorkloadError(f"{name} must be a whole number of at least {low} "
                                f"(got {value!r})")
        out.append(int(value))
    return out


def finite(name: str, value: Any, low: float = 0.0, high: float = math.inf) -> float:
    """``value`` if it is a finite number in [low, high], else a WorkloadError naming it."""
    try:
        good = not isinstance(value, bool) and isinstance(value, (int, float)) \
            and math.isfinite(value) and low <= value <= high
    except OverflowError:  # an int past a float's range: 1 followed by 400 zeros
        good = False
    if not good:
        valid = f"between {low:g} and {high:g}" if math.isfinite(high) else f">= {low:g}"
        raise WorkloadError(f"{name} must be a finite number {valid} (got {safe_repr(value)})")
    return float(value)


def _window(context_window: int | None) -> int:
    if context_window is None:
        return MAX_REQUEST_TOKENS
    return _whole(2, context_window=context_window)[0]


def _fits(prompt: int, output: int, window: int, prompt_is: str) -> None:
    """vLLM refuses a request whose prompt plus ``max_tokens`` exceeds ``max_model_len``
    (vLLM 0.23.0 ``vllm/renderers/params.py``, ``_token_len_check``: at most
    ``max_total_tokens - max_output_tokens`` prompt tokens)."""
    if prompt + output > window:
        raise WorkloadError(
            f"{prompt_is} is {prompt:,} tokens; with --output-tokens {output:,} that is "
            f"{prompt + output:,}, over the context window of {window:,} tokens (vLLM refuses "
            f"such a request); {_valid_split(prompt, output, window)}")


def _valid_split(prompt: int, output: int, window: int) -> str:
    """What would fit the window: a shorter prompt, or fewer outputs."""
    if output >= window:  # no prompt fits beside these outputs
        return f"--output-tokens must be below the context window, at most {window - 1:,}"
    shorter = f"the prompt may be at most {window - output:,} tokens"
    if prompt >= window:  # no output fits beside this prompt
        return shorter
    return f"{shorter}, or --output-tokens at most {window - prompt:,} with this prompt"


def _bounded(requests: int, chunks: int, how: str) -> None:
    if requests > MAX_REQUESTS:
        raise WorkloadError(f"{how} makes {requests:,} requests; the simulator runs at most "
                            f"{MAX_REQUESTS:,}")
    if chunks > MAX_PROMPT_CHUNKS:
        raise WorkloadError(f"{how} makes {chunks:,} full chunks of prompt in all; the "
                            f"simulator holds at most {MAX_PROMPT_CHUNKS:,} (fewer requests "
                            "or shorter prompts)")


class _Ids:
    def __init__(self) -> None:
        self.next_content = 1
        self.next_request = 0

    def content(self) -> int:
        self.next_content += 1
        return self.next_content

    def request(self) -> int:
        self.next_request += 1
        return self.next_request - 1


def long_doc_qa(documents: int, document_tokens: int, output_tokens: int, concurrency: int,
                chunk_size: int = 256, context_window: int | None = None,
                query_order: Sequence[int] | None = None) -> Workload:
    """LMCache's Long-Doc-QA: warm-up (each document once), then the query round.

    ``context_window`` is the model's ``max_model_len``: a document that does not fit it
    with the question and the output is refused, as vLLM would refuse it. ``query_order``:
    the documents the query round asks about, in order (default: each once, in order; a
    ``lmikit bench`` run's ``LongDocQA.query_prompts`` for its ``--repeat-mode``).
    """
    documents, document_tokens, output_tokens, concurrency, chunk_size = _whole(
        1, documents=documents, document_tokens=document_tokens, output_tokens=output_tokens,
        concurrency=concurrency, chunk_size=chunk_size)
    asked = documents if query_order is None else len(query_order)
    prompt = document_tokens + QUESTION_TOKENS
    _fits(prompt, output_tokens, _window(context_window),
          f"--document-tokens {document_tokens:,} plus the {QUESTION_TOKENS}-token question")
    _bounded(documents + asked, (documents + asked) * (prompt // chunk_size),
             f"--documents {documents:,} (each sent in warm-up, {asked:,} in the query round)")
    # bounded first: a hostile --documents must not build its list before being refused
    order = (list(range(documents)) if query_order is None
             else [_whole(0, query_order=d)[0] for d in query_order])
    if not order or not all(0 <= d < documents for d in order):
        raise WorkloadError(f"query_order must name documents 0 to {documents - 1} "
                            f"(got {len(order)} entries)")
    ids = _Ids()
    question = ids.content()
    docs = [ids.content() for _ in range(documents)]
    keys = [chunk_keys([(doc, document_tokens), (question, QUESTION_TOKENS)], chunk_size)
            for doc in docs]

    def round_(name: str, which: list[int], measured: bool) -> Phase:
        sessions = [[Request(ids.request(), keys[i], prompt, output_tokens, session=i)]
                    for i in which]
        return Phase(name, sessions, concurrency, measured=measured)

    return Workload("long-doc-qa", [round_("warmup", list(range(documents)), False),
                                    round_("query", order, True)],
                    chunk_size, {"documents": documents, "document_tokens": document_tokens,
                                 "output_tokens": output_tokens, "concurrency": concurrency})


def multi_turn_chat(context_tokens: int, turns: int, output_tokens: int, concurrency: int,
                    requests: int = 1000, think_time_s: float = 5.0,
                    chunk_size: int = 256, context_window: int | None = None) -> Workload:
    """Sessions of ``turns`` turns whose prompt grows to ``context_tokens`` at the last turn.

    Each turn sends the whole history (earlier user messages and answers) plus a new user
    message of ``(context_tokens - (turns - 1) x output_tokens) / turns`` tokens. The last
    turn's prompt and its output must fit ``context_window`` (the model's ``max_model_len``).
    ``requests`` is rounded up to whole sessions: ``ceil(requests / turns)`` of them.
    """
    context_tokens, turns, output_tokens, concurrency, requests, chunk_size = _whole(
        1, context_tokens=context_tokens, turns=turns, output_tokens=output_tokens,
        concurrency=concurrency, requests=requests, chunk_size=chunk_size)
    think_time_s = finite("--think-time", think_time_s)
    _bounded(max(requests, turns), 0, f"--requests {requests:,} in sessions of --turns "
                                      f"{turns:,}")
    user = (context_tokens - (turns - 1) * output_tokens) // turns
    if user < 1:
        raise WorkloadError(f"--context-tokens {context_tokens} is too small for {turns} turns "
                            f"of {output_tokens} output tokens; raise it above "
                            f"{(turns - 1) * output_tokens + turns}")
    last = turns * user + (turns - 1) * output_tokens
    _fits(last, output_tokens, _window(context_window),
          f"the last turn's prompt (--context-tokens {context_tokens:,})")
    n_sessions = max(1, -(-requests // turns))
    per_session = sum((k * user + (k - 1) * output_tokens) // chunk_size
                      for k in range(1, turns + 1))
    _bounded(n_sessions * turns, n_sessions * per_session,
             f"--requests {requests:,} in sessions of --turns {turns:,} up to "
             f"--context-tokens {context_tokens:,}")
    ids = _Ids()
    sessions = []
    for s in range(n_sessions):
        segments: list[tuple[int, int]] = []
        turns_list = []
        for _ in range(turns):
            segments.append((ids.content(), user))
            prompt = sum(n for _, n in segments)
            turns_list.append(Request(ids.request(), chunk_keys(segments, chunk_size), prompt,
                                      output_tokens, session=s))
            segments.append((ids.content(), output_tokens))
        sessions.append(turns_list)
    return Workload("multi-turn-chat", [Phase("chat", sessions, concurrency, think_time_s)],
                    chunk_size, {"context_tokens": context_tokens, "turns": turns,
                                 "output_tokens": output_tokens, "concurrency": concurrency,
                                 "requests": n_sessions * turns, "think_time_s": think_time_s})


def rag(corpus_chunks: int, chunk_tokens: int, chunks_per_request: int, zipf: float,
        output_tokens: int, concurrency: int, requests: int = 1000, query_tokens: int = 64,
        system_tokens: int = 512, seed: int = 0, chunk_size: int = 256,
        context_window: int | None = None) -> Workload:
    """Requests = a shared system prompt + k corpus chunks (Zipf popularity) + a question.

    Retrieved chunks are ordered by retrieval rank, so only requests that agree on the
    system prompt and the leading chunks share a cached prefix (no CacheBlend). A request's
    ``k`` chunks are ``k`` successive draws without replacement, chunk ``r`` (by popularity
    rank, from 1) drawn with weight ``r ** -zipf``. The prompt and the output must fit
    ``context_window`` (the model's ``max_model_len``).
    """
    corpus_chunks, chunk_tokens, chunks_per_request, output_tokens, concurrency, requests, \
        chunk_size = _whole(1, corpus_chunks=corpus_chunks, chunk_tokens=chunk_tokens,
                            chunks_per_request=chunks_per_request, output_tokens=output_tokens,
                            concurrency=concurrency, requests=requests, chunk_size=chunk_size)
    query_tokens, system_tokens = _whole(0, query_tokens=query_tokens,
                                         system_tokens=system_tokens)
    if chunks_per_request > corpus_chunks:
        raise WorkloadError(f"--chunks-per-request {chunks_per_request} exceeds --corpus-chunks "
                            f"{corpus_chunks}")
    zipf = finite("--zipf", zipf, 0.0, MAX_ZIPF)
    if corpus_chunks > MAX_CORPUS_CHUNKS:
        raise WorkloadError(f"--corpus-chunks {corpus_chunks:,} is over the simulator's "
                            f"{MAX_CORPUS_CHUNKS:,}")
    prompt = system_tokens + chunks_per_request * chunk_tokens + query_tokens
    _fits(prompt, output_tokens, _window(context_window),
          f"a {system_tokens}-token system prompt, --chunks-per-request "
          f"{chunks_per_request:,} x --chunk-tokens {chunk_tokens:,} and a "
          f"{query_tokens}-token question")
    how = f"--requests {requests:,} of --chunks-per-request {chunks_per_request:,}"
    _bounded(requests, requests * (prompt // chunk_size), how)
    if requests * chunks_per_request > MAX_PROMPT_CHUNKS:
        raise WorkloadError(f"{how} retrieve {requests * chunks_per_request:,} corpus chunks in "
                            f"all; the simulator draws at most {MAX_PROMPT_CHUNKS:,}")
    rng = random.Random(seed)
    ids = _Ids()
    system = ids.content()
    corpus = [ids.content() for _ in range(corpus_chunks)]
    weights = [rank ** -zipf for rank in range(1, corpus_chunks + 1)]
    cumulative = list(itertools.accumulate(weights))
    total = cumulative[-1]
    rest: _WeightTree | None = None
    sessions = []
    for s in range(requests):
        picked: list[int] = []
        seen: set[int] = set()
        tries = 0
        while len(picked) < chunks_per_request and tries < 4 * chunks_per_request + 16:
            tries += 1
            i = bisect.bisect_left(cumulative, rng.random() * total)
            i = min(i, corpus_chunks - 1)
            if i not in seen:
                seen.add(i)
                picked.append(i)
        if len(picked) < chunks_per_request:  # the popular chunks are taken: draw the rest
            rest = rest or _WeightTree(weights)
            picked += rest.draw_without(picked, chunks_per_request - len(picked), rng)
        segments = [(system, system_tokens)] + [(corpus[i], chunk_tokens) for i in picked] \
            + [(ids.content(), query_tokens)]
        prompt = sum(n for _, n in segments)
        sessions.append([Request(ids.request(), chunk_keys(segments, chunk_size), prompt,
                                 output_tokens, session=s, prefix_id=None)])
    return Workload("rag", [Phase("rag", sessions, concurrency)], chunk_size,
                    {"corpus_chunks": corpus_chunks, "chunk_tokens": chunk_tokens,
                     "chunks_per_request": chunks_per_request, "zipf": zipf,
                     "output_tokens": output_tokens, "concurrency": concurrency,
                     "requests": requests})


class _WeightTree:
    """Weighted draws without replacement, O(log n) each: a Fenwick tree of the weights.

    >>> t = _WeightTree([1.0, 0.0, 1e-300])
    >>> t.draw_without([0], 1, random.Random(1))
    [2]
    >>> t.tree == _WeightTree([1.0, 0.0, 1e-300]).tree  # restored exactly after each use
    True
    """

    def __init__(self, weights: list[float]) -> None:
        self.n = len(weights)
        self.weights = weights
        self.tree = [0.0] * (self.n + 1)
        for i, w in enumerate(weights, 1):
            self.tree[i] += w
            parent = i + (i & -i)
            if parent <= self.n:
                self.tree[parent] += self.tree[i]

    def _remove(self, i: int, undo: list[tuple[int, float]]) -> None:
        node = i + 1
        while node <= self.n:
            undo.append((node, self.tree[node]))
            self.tree[node] -= self.weights[i]
            node += node & -node

    def _find(self, target: float) -> int:
        """The first index whose running sum of weights exceeds ``target``."""
        pos, step = 0, 1 << self.n.bit_length()
        while step:
            nxt = pos + step
            if nxt <= self.n and self.tree[nxt] <= target:
                pos = nxt
                target -= self.tree[nxt]
            step >>= 1
        return pos

    def _total(self) -> float:
        total, node = 0.0, self.n
        while node:
            total += self.tree[node]
            node -= node & -node
        return total

    def draw_without(self, taken: list[int], k: int, rng: random.Random) -> list[int]:
        """``k`` successive weighted draws among the indexes not in ``taken``."""
        undo: list[tuple[int, float]] = []
        gone = set(taken)
        for i in gone:
            self._remove(i, undo)
        out: list[int] = []
        lowest = 0  # no index below it is left; gone only grows, so it only moves up
        for _ in range(k):
            i = self._find(rng.random() * self._total())
            if i >= self.n or i in gone or self.weights[i] <= 0:  # rounding, or nothing left
                while lowest in gone:  # the most popular left (a scan from 0 for each such
                    lowest += 1        # draw made a steep corpus's k draws take k^2 steps)
                i = lowest
            out.append(i)
            gone.add(i)
            self._remove(i, undo)
        for node, value in reversed(undo):
            self.tree[node] = value
        return out


def load_trace(path: str | Path, chunk_size: int = 256,
               context_window: int | None = None) -> Workload:
    """A replayed trace: one JSON object per line.

    Keys: ``arrival_s`` (seconds from the start), ``output_tokens``, and either
    ``prompt_token_ids`` (a list of ints) or ``chunk_ids`` (one content id per full chunk,
    ints or strings, with optional ``prompt_tokens``); optional ``session_id`` and
    ``prefix_id``.
    """
    p = Path(path)
    chunk_size = _whole(1, chunk_size=chunk_size)[0]
    window = _window(context_window)
    records: list[Request] = []
    chunks = 0
    try:
        text = read_limited(p, MAX_TRACE_BYTES, f"trace {str(p)!r}").decode("utf-8")
    except FileRefused as exc:
        raise WorkloadError(str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"cannot read trace {str(p)!r}: {exc}") from exc
    for n, line in enumerate(io.StringIO(text), 1):
        if not line.strip():
            continue
        if len(records) == MAX_REQUESTS:
            raise WorkloadError(f"trace {str(p)!r} has more than {MAX_REQUESTS:,} requests "
                                f"(line {n}); the simulator runs at most {MAX_REQUESTS:,}")
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise WorkloadError(f"{p}:{n}: not JSON ({exc})") from exc
        except RecursionError as exc:
            raise WorkloadError(f"{p}:{n}: nests too deeply to be a trace record") from exc
        if not isinstance(data, dict):
            raise WorkloadError(f"{p}:{n}: each line must be a JSON object")
        # numbered by record, not by line: ids index the loop's per-request arrays, and a
        # file of blank lines would otherwise size them by its line count
        req = _trace_request(data, f"{p}:{n}", len(records), chunk_size, window)
        chunks += len(req.keys)
        if chunks > MAX_PROMPT_CHUNKS:
            raise WorkloadError(f"trace {str(p)!r} has more than {MAX_PROMPT_CHUNKS:,} full "
                                f"chunks of prompt by line {n}; the simulator holds at most "
                                f"{MAX_PROMPT_CHUNKS:,}")
        records.append(req)
    if not records:
        raise WorkloadError(f"trace {str(p)!r} has no requests")
    records.sort(key=lambda r: (r.arrival_s or 0.0, r.id))
    return Workload("trace", [Phase("trace", [[r] for r in records], open_loop=True)],
                    chunk_size, {"trace": str(p), "requests": len(records)})


def _trace_request(d: dict[str, Any], where: str, rid: int, chunk: int,
                   window: int = MAX_REQUEST_TOKENS) -> Request:
    def number(key: str, low: float, default: float | None = None,
               high: float = math.inf) -> float:
        return finite(f"{where}: {key}", d.get(key, default), low, high)

    def whole(key: str, low: int, default: int | None = None) -> int:
        value = number(key, low, default)
        if value != int(value):
            raise WorkloadError(f"{where}: {key} must be a whole number of at least {low} "
                                f"(got {d.get(key, default)!r})")
        return int(value)

    arrival = number("arrival_s", 0, high=MAX_ARRIVAL_S)
    output = whole("output_tokens", 1)
    if "prompt_token_ids" in d and "chunk_ids" in d:
        raise WorkloadError(f"{where}: give either prompt_token_ids or chunk_ids, not both")
    if "prompt_token_ids" in d:
        tokens = d["prompt_token_ids"]
        if not isinstance(tokens, list) or not tokens or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise WorkloadError(f"{where}: prompt_token_ids must be a non-empty list of ints")
        prompt = len(tokens)
    elif "chunk_ids" in d:
        cids = d["chunk_ids"]
        if not isinstance(cids, list) or not all(isinstance(c, (int, str))
                                                 and not isinstance(c, bool) for c in cids):
            raise WorkloadError(f"{where}: chunk_ids must be a list of ints or strings")
        prompt = whole("prompt_tokens", 1, len(cids) * chunk or 1)
        if prompt < len(cids) * chunk:
            raise WorkloadError(f"{where}: prompt_tokens {prompt} is shorter than its "
                                f"{len(cids)} chunks of {chunk} tokens")
    else:
        raise WorkloadError(f"{where}: needs prompt_token_ids or chunk_ids")
    if prompt + output > window:
        raise WorkloadError(f"{where}: a prompt of {prompt:,} tokens and output_tokens "
                            f"{output:,} make {prompt + output:,}, over the context window of "
                            f"{window:,} tokens (vLLM refuses such a request)")
    keys = token_chunk_keys(tokens, chunk) if "prompt_token_ids" in d else id_chunk_keys(cids)
    session = d.get("session_id")
    prefix = d.get("prefix_id")
    return Request(rid, keys, prompt, output,
                   session=stable_id(str(session)) if session is not None else -1 - rid,
                   prefix_id=stable_id(str(prefix)) if prefix is not None else None,
                   arrival_s=arrival)
