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

>>> w = long_doc_qa(documents=3, document_tokens=1000, output_tokens=10, concurrency=2,
...                 chunk_size=256)
>>> [(p.name, len(p.sessions), p.measured) for p in w.phases]
[('warmup', 3, False), ('query', 3, True)]
>>> w.phases[0].sessions[0][0].keys == w.phases[1].sessions[0][0].keys
True
"""

from __future__ import annotations

import bisect
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lmikit.errors import SimulationError
from lmikit.sim.tiers import chunk_keys, id_chunk_keys, stable_id, token_chunk_keys

QUESTION_TOKENS = 12  # "Summarize the document above in one sentence." plus separators


WorkloadError = SimulationError


@dataclass(frozen=True)
class Request:
    """One request: its chunk keys (full chunks only), sizes, and routing hints."""

    id: int
    keys: tuple[int, ...]
    prompt_tokens: int
    output_tokens: int
    session: int
    prefix_id: int | None = None
    arrival_s: float | None = None  # open-loop phases only
    forced: tuple[str, int] | None = None  # (tier, cached tokens): calibration replays
    # sent as token ids (vLLM's completions API takes a list of ints as ``prompt``): vLLM's
    # API server does not tokenize it (vLLM 0.23.0 ``renderers/inputs/preprocess.py`` makes it
    # a ``TokensPrompt``; ``renderers/base.py`` tokenizes only prompts without token ids)
    pretokenized: bool = False


class Dispatcher(Protocol):
    """A load generator's own rule for when a closed-loop phase sends its requests.

    Given to a :class:`Phase`, it replaces the phase's users: the loop sends what
    :meth:`start` returns when the phase starts, and what :meth:`finished` returns when one
    of the phase's requests ends. It must send each of the phase's requests exactly once.
    """

    def start(self) -> list[Request]: ...

    def finished(self, request_id: int) -> list[Request]: ...


@dataclass(frozen=True)
class Phase:
    name: str
    sessions: list[list[Request]]
    concurrency: int = 1
    think_time_s: float = 0.0
    measured: bool = True
    open_loop: bool = False
    dispatcher: Dispatcher | None = None  # sends the sessions' requests in its own order


@dataclass(frozen=True)
class Workload:
    name: str
    phases: list[Phase]
    chunk_size: int
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def requests(self) -> list[Request]:
        return [r for p in self.phases for s in p.sessions for r in s]


def _positive(**values: float) -> None:
    for name, value in values.items():
        if value < 1:
            raise WorkloadError(f"{name} must be at least 1 (got {value})")


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
                chunk_size: int = 256) -> Workload:
    """LMCache's Long-Doc-QA: warm-up (each document once), then the query round."""
    _positive(documents=documents, document_tokens=document_tokens,
              output_tokens=output_tokens, concurrency=concurrency)
    ids = _Ids()
    question = ids.content()
    docs = [ids.content() for _ in range(documents)]
    prompt = document_tokens + QUESTION_TOKENS

    def round_(name: str, measured: bool) -> Phase:
        sessions = []
        for i, doc in enumerate(docs):
            keys = chunk_keys([(doc, document_tokens), (question, QUESTION_TOKENS)], chunk_size)
            sessions.append([Request(ids.request(), keys, prompt, output_tokens, session=i)])
        return Phase(name, sessions, concurrency, measured=measured)

    return Workload("long-doc-qa", [round_("warmup", False), round_("query", True)],
                    chunk_size, {"documents": documents, "document_tokens": document_tokens,
                                 "output_tokens": output_tokens, "concurrency": concurrency})


def multi_turn_chat(context_tokens: int, turns: int, output_tokens: int, concurrency: int,
                    requests: int = 1000, think_time_s: float = 5.0,
                    chunk_size: int = 256) -> Workload:
    """Sessions of ``turns`` turns whose prompt grows to ``context_tokens`` at the last turn.

    Each turn sends the whole history (earlier user messages and answers) plus a new user
    message of ``(context_tokens - (turns - 1) x output_tokens) / turns`` tokens.
    """
    _positive(context_tokens=context_tokens, turns=turns, output_tokens=output_tokens,
              concurrency=concurrency, requests=requests)
    user = (context_tokens - (turns - 1) * output_tokens) // turns
    if user < 1:
        raise WorkloadError(f"--context-tokens {context_tokens} is too small for {turns} turns "
                            f"of {output_tokens} output tokens; raise it above "
                            f"{(turns - 1) * output_tokens + turns}")
    ids = _Ids()
    n_sessions = max(1, -(-requests // turns))
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
        system_tokens: int = 512, seed: int = 0, chunk_size: int = 256) -> Workload:
    """Requests = a shared system prompt + k corpus chunks (Zipf popularity) + a question.

    Retrieved chunks are ordered by retrieval rank, so only requests that agree on the
    system prompt and the leading chunks share a cached prefix (no CacheBlend).
    """
    _positive(corpus_chunks=corpus_chunks, chunk_tokens=chunk_tokens,
              chunks_per_request=chunks_per_request, output_tokens=output_tokens,
              concurrency=concurrency, requests=requests)
    if chunks_per_request > corpus_chunks:
        raise WorkloadError(f"--chunks-per-request {chunks_per_request} exceeds --corpus-chunks "
                            f"{corpus_chunks}")
    if zipf < 0:
        raise WorkloadError(f"--zipf must be >= 0 (got {zipf})")
    rng = random.Random(seed)
    ids = _Ids()
    system = ids.content()
    corpus = [ids.content() for _ in range(corpus_chunks)]
    cumulative = []
    total = 0.0
    for rank in range(1, corpus_chunks + 1):
        total += rank ** -zipf
        cumulative.append(total)
    sessions = []
    for s in range(requests):
        picked: list[int] = []
        while len(picked) < chunks_per_request:
            i = bisect.bisect_left(cumulative, rng.random() * total)
            i = min(i, corpus_chunks - 1)
            if corpus[i] not in picked:
                picked.append(corpus[i])
        segments = [(system, system_tokens)] + [(c, chunk_tokens) for c in picked] \
            + [(ids.content(), query_tokens)]
        prompt = sum(n for _, n in segments)
        sessions.append([Request(ids.request(), chunk_keys(segments, chunk_size), prompt,
                                 output_tokens, session=s, prefix_id=None)])
    return Workload("rag", [Phase("rag", sessions, concurrency)], chunk_size,
                    {"corpus_chunks": corpus_chunks, "chunk_tokens": chunk_tokens,
                     "chunks_per_request": chunks_per_request, "zipf": zipf,
                     "output_tokens": output_tokens, "concurrency": concurrency,
                     "requests": requests})


def load_trace(path: str | Path, chunk_size: int = 256) -> Workload:
    """A replayed trace: one JSON object per line.

    Keys: ``arrival_s`` (seconds from the start), ``output_tokens``, and either
    ``prompt_token_ids`` (a list of ints) or ``chunk_ids`` (one content id per full chunk,
    ints or strings, with optional ``prompt_tokens``); optional ``session_id`` and
    ``prefix_id``.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WorkloadError(f"cannot read trace {str(p)!r}: {exc}") from exc
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise WorkloadError(f"{p}:{n}: not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise WorkloadError(f"{p}:{n}: each line must be a JSON object")
        records.append(_trace_request(data, f"{p}:{n}", n - 1, chunk_size))
    if not records:
        raise WorkloadError(f"trace {str(p)!r} has no requests")
    records.sort(key=lambda r: (r.arrival_s or 0.0, r.id))
    return Workload("trace", [Phase("trace", [[r] for r in records], open_loop=True)],
                    chunk_size, {"trace": str(p), "requests": len(records)})


def _trace_request(d: dict[str, Any], where: str, rid: int, chunk: int) -> Request:
    def number(key: str, low: float, default: float | None = None) -> float:
        value = d.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < low:
            raise WorkloadError(f"{where}: {key} must be a number >= {low:g} (got {value!r})")
        return float(value)

    arrival = number("arrival_s", 0)
    output = int(number("output_tokens", 1))
    if "prompt_token_ids" in d:
        tokens = d["prompt_token_ids"]
        if not isinstance(tokens, list) or not tokens or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise WorkloadError(f"{where}: prompt_token_ids must be a non-empty list of ints")
        keys = token_chunk_keys(tokens, chunk)
        prompt = len(tokens)
    elif "chunk_ids" in d:
        cids = d["chunk_ids"]
        if not isinstance(cids, list) or not all(isinstance(c, (int, str))
                                                 and not isinstance(c, bool) for c in cids):
            raise WorkloadError(f"{where}: chunk_ids must be a list of ints or strings")
        keys = id_chunk_keys(cids)
        prompt = int(number("prompt_tokens", 1, len(cids) * chunk or 1))
        if prompt < len(cids) * chunk:
            raise WorkloadError(f"{where}: prompt_tokens {prompt} is shorter than its "
                                f"{len(cids)} chunks of {chunk} tokens")
    else:
        raise WorkloadError(f"{where}: needs prompt_token_ids or chunk_ids")
    session = d.get("session_id")
    prefix = d.get("prefix_id")
    return Request(rid, keys, prompt, output,
                   session=stable_id(str(session)) if session is not None else -1 - rid,
                   prefix_id=stable_id(str(prefix)) if prefix is not None else None,
                   arrival_s=arrival)
