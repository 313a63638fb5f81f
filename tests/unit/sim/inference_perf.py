"""What the 2026 llm-d rebuilds share of inference-perf (kubernetes-sigs/inference-perf at
3c7c4a3, the image their bench jobs ran, and v0.5.0 where the b2b-saas job ran it): its
length sampler, its report's time base, and how its client sends requests.

- ``utils/distribution.py``, ``sample_from_distribution``: draws, then clips, rounds and
  clips again to the configured range; ``type: lognormal`` turns the configured mean and
  standard deviation into the underlying normal's mu and sigma.
- ``reportgen/base.py``, ``summarize_requests``: token rates and latency percentiles are
  over the successful requests, the time base is last end - first start over every request,
  and a request that failed by the client's timeout ends at its send + the timeout.
- ``loadgen/load_generator.py`` and ``apis/user_session.py``: when a ``concurrent`` stage
  sends each request (:class:`ConcurrentWorkers`, :func:`concurrent_load`);
  ``client/modelserver/openai_client.py``: which pod of a Kubernetes Service a request
  reaches (:class:`KeepAliveService`).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

import numpy as np

from lmikit.sim._loop import RunResult
from lmikit.sim._workloads import Request

QWEN3_VOCAB = 151_643  # the Qwen3 tokenizer's vocab_size (its added tokens' ids start here)
VLLM_KEEPALIVE_S = 5.0  # vLLM 0.19.0 envs.py VLLM_HTTP_TIMEOUT_KEEP_ALIVE: idle connections close


def clip_round(values: np.ndarray, low: int, high: int) -> list[int]:
    """``sample_from_distribution``'s tail: clip, round, clip.

    >>> clip_round(np.array([0.4, 2.5, 9.0]), 1, 5)
    [1, 2, 5]
    """
    return [int(v) for v in np.clip(np.round(np.clip(values, low, high)).astype(int), low, high)]


def lognormal(rng: np.random.Generator, mean: float, sd: float, low: int, high: int,
              count: int) -> list[int]:
    """``sample_from_distribution`` for ``type: lognormal``."""
    sigma_sq = math.log(1.0 + (sd / mean) ** 2)
    mu = math.log(mean) - sigma_sq / 2.0
    return clip_round(rng.lognormal(mean=mu, sigma=math.sqrt(sigma_sq), size=count), low, high)


def successes_and_span(reqs: Sequence[Request], out: RunResult, failed: Collection[int],
                       timeout_s: float) -> tuple[list[Request], float]:
    """The requests ``summarize_requests`` reports on, and the seconds its rates divide by."""
    ok = [r for r in reqs if r.id not in failed]
    start = min(out.arrival[r.id] for r in reqs)
    end = max(out.arrival[r.id] + timeout_s if r.id in failed else out.end[r.id] for r in reqs)
    return ok, end - start


class KeepAliveService:
    """inference-perf's workers sending through a Kubernetes Service over keep-alive connections.

    A Service picks an endpoint per *connection*: kube-proxy's iptables mode sends each new
    connection to an endpoint drawn at random (kubernetes ``pkg/proxy/iptables/proxier.go``,
    one ``-m statistic --mode random`` rule per endpoint). inference-perf (v0.5.0 and
    3c7c4a3, ``client/modelserver/openai_client.py``) gives each worker process one
    ``aiohttp.ClientSession`` over a ``TCPConnector``, which hands a request the connection
    idle longest (aiohttp 3.11-3.13, the versions its ``aiohttp>=3.11.11`` admits,
    ``connector.py``: ``_release`` appends, ``_get`` takes ``popleft()``), skipping one the
    server has closed; vLLM's server closes a connection idle for 5 s
    (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, vLLM 0.19.0 ``envs.py`` and
    ``entrypoints/openai/api_server.py``), before aiohttp's own 15 s. With none idle, a new
    connection goes to a random pod.

    ``worker_of`` names the worker that sends a request: the worker a request's queue
    channel belongs to, or ``None`` for a shared queue, which any idle worker may take
    (drawn at random among ``workers``). A request in ``dropped`` (one the client's timeout
    cut) loses its connection: aiohttp closes a connection whose response it abandons. The
    event loop sets ``now`` before each pick and calls :meth:`finished` when a request ends.

    >>> class R:
    ...     def __init__(self, i): self.id = i
    >>> svc = KeepAliveService(random.Random(0), workers=1, worker_of=lambda r: 0)
    >>> first = svc.pick(R(0), [None] * 8)
    >>> svc.finished(0, 1.0)
    >>> svc.now = 3.0; svc.pick(R(1), [None] * 8) == first  # reused, idle 2 s
    True
    >>> svc.finished(1, 4.0)
    >>> svc.now = 10.0; _ = svc.pick(R(2), [None] * 8); svc.opened  # idle 6 s: closed
    2
    """

    name = "kubernetes-service"

    def __init__(self, rng: random.Random, *, workers: int,
                 worker_of: Callable[[Any], int | None] = lambda r: None,
                 keepalive_s: float = VLLM_KEEPALIVE_S, dropped: Collection[int] = ()) -> None:
        self.rng = rng
        self.dropped = dropped
        self.workers = workers
        self.worker_of = worker_of
        self.keepalive_s = keepalive_s
        self.now = 0.0  # set by the event loop before each pick
        self.idle: dict[int, deque[tuple[int, float]]] = {}
        self.held: dict[int, tuple[int, int]] = {}  # request id -> (worker, pod)
        self.opened = 0  # connections opened

    def pick(self, req: Any, fleet: Sequence[Any]) -> int:
        w = self.worker_of(req)
        if w is None:
            w = self.rng.randrange(self.workers)
        idle = self.idle.setdefault(w, deque())
        while idle:
            pod, since = idle.popleft()
            if self.now - since <= self.keepalive_s:
                break
        else:
            pod = self.rng.randrange(len(fleet))
            self.opened += 1
        self.held[req.id] = (w, pod)
        return pod

    def finished(self, request_id: int, t: float) -> None:
        w, pod = self.held.pop(request_id)
        if request_id not in self.dropped:
            self.idle[w].append((pod, t))


class ConcurrentWorkers:
    """inference-perf's ``concurrent`` load: per-worker channels, permits and session locks.

    ``loadgen/load_generator.py`` (3c7c4a3), ``Worker.loop``: worker ``w`` takes the next
    request of its own channel whenever its semaphore has a permit (``slots[w]`` of them) and
    gives the permit back when that request ends. ``apis/user_session.py``,
    ``LocalUserSession.get_context``: building a turn's payload (so before it takes a
    connection), the turn waits, in the order turns arrive, until the previous turn of its
    user session has ended, holding its permit meanwhile. ``channels[w]`` is worker ``w``'s
    requests in channel order, each with its user session's key.

    >>> from lmikit.sim import Request
    >>> a, b, c = (Request(i, (), 1, 1, session=0) for i in range(3))
    >>> load = ConcurrentWorkers([[(a, "s"), (b, "s"), (c, "t")]], [2])
    >>> [r.id for r in load.start()]  # b waits for a, holding the second permit
    [0]
    >>> [r.id for r in load.finished(0)]  # a ends: b goes, then c takes a's permit
    [1, 2]
    """

    def __init__(self, channels: Sequence[Sequence[tuple[Request, Hashable]]],
                 slots: Sequence[int]) -> None:
        self.channels = [deque(c) for c in channels]
        self.free = list(slots)
        self.taken: dict[int, tuple[int, Hashable]] = {}  # request id -> (worker, session)
        self.busy: set[Hashable] = set()  # sessions with a turn in flight
        self.waiting: dict[Hashable, deque[Request]] = {}

    def _take(self, w: int) -> list[Request]:
        sent = []
        while self.free[w] and self.channels[w]:
            r, key = self.channels[w].popleft()
            self.free[w] -= 1
            self.taken[r.id] = (w, key)
            if key in self.busy:
                self.waiting.setdefault(key, deque()).append(r)
            else:
                self.busy.add(key)
                sent.append(r)
        return sent

    def start(self) -> list[Request]:
        return [r for w in range(len(self.channels)) for r in self._take(w)]

    def worker_of(self, req: Request) -> int:
        """The worker that took ``req`` (sent and not yet finished)."""
        return self.taken[req.id][0]

    def finished(self, request_id: int) -> list[Request]:
        w, key = self.taken.pop(request_id)
        self.free[w] += 1
        waiters = self.waiting.get(key)
        sent = [waiters.popleft()] if waiters else []
        if not sent:
            self.busy.discard(key)
        return sent + self._take(w)


def concurrent_load(requests: Sequence[Request], conc: int, workers: int,
                    session_of: Callable[[int, Request], Hashable]) -> ConcurrentWorkers:
    """The per-worker channels and permits of a ``concurrent`` stage at ``conc``.

    ``requests`` in the generator's order: request ``i``'s ``preferred_worker_id`` is its
    conversation slot ``i % conc`` (``conversation_replay_datagen.py``, ``get_data``), which
    ``run_stage`` sends to worker ``slot % min(workers, conc)``; ``_set_worker_concurrency``
    gives each worker ``conc // workers`` permits, one more to the first ``conc % workers``.
    ``session_of(i, request)`` is the user session whose lock the request takes.

    >>> from lmikit.sim import Request
    >>> reqs = [Request(i, (), 1, 1, session=i % 4) for i in range(8)]
    >>> load = concurrent_load(reqs, 4, 3, lambda i, r: i)
    >>> [[r.id for r, _ in c] for c in load.channels], load.free
    ([[0, 3, 4, 7], [1, 5], [2, 6]], [2, 1, 1])
    """
    active = min(workers, conc)
    channels: list[list[tuple[Request, Hashable]]] = [[] for _ in range(active)]
    for i, r in enumerate(requests):
        channels[(i % conc) % active].append((r, session_of(i, r)))
    slots = [conc // active + (1 if w < conc % active else 0) for w in range(active)]
    return ConcurrentWorkers(channels, slots)
