"""Routing across model copies, as SageMaker describes each strategy.

Its rules and their sources: docs/planner-model.md, "Routing across copies".

>>> class C:
...     def __init__(self, n, held): self.outstanding = self.queued = n; self._held = held
...     def holds(self, keys): return self._held
>>> fleet = [C(3, 0), C(1, 2), C(0, 0)]
>>> LeastOutstanding().pick(None, fleet), KvAware(busy_at=8).pick(None, fleet)
(2, 1)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from lmikit.sim._tiers import LruTier

ROUTINGS = ("sticky_session", "prefix_aware", "kv_aware", "least_outstanding", "random")
BYTES_PER_TOKEN = 4  # English text under a BPE tokenizer: PrefixLength bytes -> tokens


class Copy(Protocol):
    outstanding: int  # routed here and not finished

    @property
    def queued(self) -> int: ...  # routed here and not yet prefilling

    @property
    def num_waiting(self) -> int: ...  # vLLM's num_requests_waiting (a metric it exports)

    @property
    def kv_usage(self) -> float: ...  # share of the GPU KV pool in use (0..1)

    def holds(self, keys: Sequence[int]) -> int: ...


class RoutedRequest(Protocol):
    @property
    def keys(self) -> tuple[int, ...]: ...

    @property
    def session(self) -> int: ...

    @property
    def prefix_id(self) -> int | None: ...


class Router(Protocol):
    name: str

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int: ...


def _least(fleet: Sequence[Copy], start: int = 0) -> int:
    """Fewest in flight; ties go to the first at or after ``start`` (a rotating start)."""
    n = len(fleet)
    best, best_load = start % n, fleet[start % n].outstanding
    for step in range(1, n):
        i = (start + step) % n
        load = fleet[i].outstanding
        if load < best_load:
            best, best_load = i, load
    return best


class RandomRouter:
    name = "random"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int:
        return self.rng.randrange(len(fleet))


class LeastOutstanding:
    name = "least_outstanding"

    def __init__(self) -> None:
        self._turn = 0

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int:
        self._turn += 1
        return _least(fleet, self._turn)


class StickySession:
    name = "sticky_session"

    def __init__(self) -> None:
        self.placed: dict[int, int] = {}
        self._new = LeastOutstanding()  # the variant's strategy places a new session

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int:
        where = self.placed.get(req.session)
        if where is None:
            where = self.placed[req.session] = self._new.pick(req, fleet)
        return where


class PrefixAware:
    """SageMaker's ``PREFIX_AWARE`` (botocore's ``ProductionVariantRoutingConfig`` and
    ``PrefixAwareRoutingConfig``): copies ``i * per_instance`` to ``(i + 1) * per_instance
    - 1`` are instance ``i``'s."""

    name = "prefix_aware"

    def __init__(self, prefix_length_bytes: int, concurrency_threshold: int,
                 chunk_size: int, per_instance: int = 1) -> None:
        # the prefix in whole chunks (chunk keys are what prompts are made of here): at
        # least one, so a PrefixLength under a chunk hashes the first chunk
        self.prefix_chunks = max(1, prefix_length_bytes // BYTES_PER_TOKEN // chunk_size)
        self.threshold = concurrency_threshold
        self.per_instance = max(1, per_instance)
        self._least = LeastOutstanding()

    def prefix_key(self, req: RoutedRequest) -> int:
        """The prefix (a prompt under one chunk: its session, standing for its text), with
        the ``PrefixAwareId`` when there is one: requests go together only when both match
        ("routes requests with the same prefix and the same identifier to the same
        instance", botocore's ``InvokeEndpointInput.PrefixAwareId``)."""
        key = req.keys[min(len(req.keys), self.prefix_chunks) - 1] if req.keys else req.session
        return key if req.prefix_id is None else hash((req.prefix_id, key))

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int:
        n, per = len(fleet), self.per_instance
        instances = -(-n // per)
        if instances < 2:
            return self._least.pick(req, fleet)
        key = self.prefix_key(req)
        home, slot = key % instances, key // instances
        for step in range(instances):
            first = (home + step) % instances * per
            size = min(per, n - first)
            for k in range(size):
                i = first + (slot + k) % size
                if fleet[i].outstanding < self.threshold:
                    return i
        return _least(fleet, home * per)


class KvAware:
    """Longest held prefix, weighed against load the way llm-d's scorers weigh them.

    Score = share of the prompt's chunks the copy holds + (most queued - its queued) /
    (most queued - least queued), over the copies with fewer than ``busy_at`` requests
    queued (waiting to prefill); the highest score wins, ties to the less busy. SageMaker
    does not publish its weighing; this is llm-d's equal-weight default (prefix-cache scorer
    + queue scorer).

    A fleet whose copies cache only the chunks it reports (the event loop's) sets
    :attr:`holders` to an empty dict and calls :meth:`note` for each chunk it caches on a
    copy other than through a request routed there (an answer's chunk the session's next
    turn repeats); the router notes each pick itself. A chunk's key chains every token
    before it, so a copy can hold the prompt's first ``n`` chunks only if it was sent each
    of them: that bounds each copy's score, and copies are asked what they hold, best
    bound first, only while one could still win. The picks are the same as asking every
    copy; a pick costs one look at each copy's queue and few walks of its caches. Without
    the index every open copy is bounded by the whole prompt, and the same search runs.
    """

    name = "kv_aware"
    DEPTH = 8  # chunks from a prompt's start the index follows

    def __init__(self, busy_at: int) -> None:
        self.busy_at = busy_at
        self._turn = 0
        # (position, chunk key) -> copies sent it there (None: no index)
        self.holders: dict[tuple[int, int], set[int]] | None = None

    def note(self, copy: int, keys: Sequence[int], start: int = 0) -> None:
        """Copy ``copy`` may now hold ``keys[start:]`` (the chunks of a prompt from there)."""
        holders = self.holders
        if holders is None:
            return
        for j in range(start, min(len(keys), self.DEPTH)):
            holders.setdefault((j, keys[j]), set()).add(copy)

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int:
        self._turn += 1
        keys = req.keys if req is not None else ()
        busy_at = self.busy_at
        queued = [c.queued for c in fleet]
        if self.holders is None:  # no index: any open copy may hold the whole prompt
            bound = {i: len(keys) for i, q in enumerate(queued) if q < busy_at}
        else:
            bound = self._bounds(keys, queued)
        pick = self._search(bound, keys, queued, fleet) if bound else -1
        if pick < 0:  # no copy holds any of it
            pick = _least(fleet, self._turn)
        self.note(pick, keys)  # nothing without an index
        return pick

    def _bounds(self, keys: Sequence[int], queued: list[int]) -> dict[int, int]:
        """Open copy -> the most chunks of ``keys`` it can hold (from the index)."""
        assert self.holders is not None
        holders, busy_at = self.holders, self.busy_at
        bound: dict[int, int] = {}
        if not keys:
            return bound
        reach = {i for i in holders.get((0, keys[0]), ()) if queued[i] < busy_at}
        depth, last = 1, min(len(keys), self.DEPTH)
        while reach and depth < last:
            further = reach & holders.get((depth, keys[depth]), set())
            for i in reach - further:
                bound[i] = depth
            reach, depth = further, depth + 1
        for i in reach:  # sent every chunk the index follows: maybe the whole prompt
            bound[i] = len(keys)
        return bound

    def _search(self, bound: dict[int, int], keys: Sequence[int], queued: list[int],
                fleet: Sequence[Copy]) -> int:
        """The pick by score, asking copies what they hold best bound first and stopping
        once no bound left can beat or tie the best; -1 if none holds any of the prompt."""
        # the best copy that holds nothing for sure: one not in ``bound``
        lo, hi, rest, rest_q, rest_out = self._open(queued, fleet, bound)
        span = (hi - lo) or 1
        total = max(1, len(keys))
        ranked = sorted((-(n / total + (hi - queued[i]) / span), fleet[i].outstanding, i)
                        for i, n in bound.items())
        best: tuple[float, int, int] | None = None  # (score, -in flight, -index)
        found = False  # a copy asked holds some of the prompt
        for neg_bound, out, i in ranked:
            if found and best is not None and (-neg_bound, -out, -i) < best:
                break  # this bound, and every one after it, loses to the best
            n = fleet[i].holds(keys)
            found = found or n > 0
            key = (n / total + (hi - queued[i]) / span, -out, -i)
            if best is None or key > best:
                best = key
        if not found:
            return -1
        assert best is not None
        if rest >= 0 and ((hi - rest_q) / span, -rest_out, -rest) > best:
            return rest
        return -best[2]

    def _open(self, queued: list[int], fleet: Sequence[Copy], skip: dict[int, int],
              ) -> tuple[int, int, int, int, int]:
        """Over the open copies (fewer than ``busy_at`` queued), in one pass: the shortest
        and the longest queue, and the first copy not in ``skip`` with the shortest queue,
        then the fewest in flight (-1 if none), with its queue and its count in flight."""
        busy_at = self.busy_at
        lo, hi = busy_at, -1
        rest, rest_q, rest_out = -1, 0, 0
        for i, q in enumerate(queued):
            if q >= busy_at:
                continue
            if q < lo:
                lo = q
            if q > hi:
                hi = q
            if i not in skip:
                out = fleet[i].outstanding
                if rest < 0 or q < rest_q or (q == rest_q and out < rest_out):
                    rest, rest_q, rest_out = i, q, out
        return lo, hi, rest, rest_q, rest_out


class Epp:
    """llm-d's endpoint picker: weighted scorers, the highest weighted sum wins.

    As configured by an ``EndpointPickerConfig`` with a ``max-score-picker`` (ties go to a
    random one of the best). Scorers (gateway-api-inference-extension
    ``pkg/epp/scheduling/framework/plugins/scorer/queue.go`` and ``kvcache_utilization.go``;
    llm-d-inference-scheduler ``precise_prefix_cache``):

    - queue: (longest waiting queue - its queue) / (longest - shortest), 1 when all equal,
      on vLLM's ``num_requests_waiting`` (``Copy.num_waiting``: requests its scheduler
      could not start, not those it has started and is prefilling in chunks);
    - kv-cache utilization: 1 - the share of its KV pool in use;
    - precise prefix cache: chunks of the prompt the copy holds from the start (its real
      cache, as vLLM's KV events report it), min-max normalized over the copies holding
      any (1 when they hold equally, 0 for a copy holding none);
    - approximate prefix cache (``approximate=(capacity_chunks, prefix_chunks)``): the
      share of the first ``prefix_chunks`` chunks that the router itself last sent to the
      copy, remembered in a per-copy LRU of ``capacity_chunks`` (routing history, not the
      cache: it goes on believing in chunks the copy has evicted).

    With ``refresh_s`` the queue and KV-cache scorers read each copy's metrics as the picker
    last scraped them: one ticker per copy every ``refresh_s`` (the picker's
    ``refreshMetricsInterval``, 50 ms by default in gateway-api-inference-extension v0.5.1,
    ``pkg/epp/backend/metrics/pod_metrics.go``), sampled at the first pick after each tick.
    The event loop sets ``now`` before each pick.

    >>> class C:
    ...     def __init__(self, q, held): self.num_waiting, self._held, self.kv_usage = q, held, .5
    ...     def holds(self, keys): return self._held
    >>> class R: keys = (1, 2, 3)
    >>> Epp(random.Random(0), prefix_weight=2, queue_weight=1).pick(R(), [C(0, 0), C(3, 3)])
    1
    """

    name = "epp"

    def __init__(self, rng: random.Random, *, prefix_weight: float = 0.0,
                 kv_weight: float = 0.0, queue_weight: float = 0.0,
                 approximate: tuple[int, int] | None = None, refresh_s: float = 0.0) -> None:
        self.rng = rng
        self.weights = (prefix_weight, kv_weight, queue_weight)
        self.approximate = approximate
        self.index: list[LruTier] = []
        self.refresh_s = refresh_s
        self.now = 0.0  # set by the event loop before each pick
        self._seen: list[tuple[int, float]] = []
        self._next: list[float] = []

    def _metrics(self, fleet: Sequence[Copy]) -> list[tuple[int, float]]:
        """(waiting queue, KV usage) of each copy as the picker last scraped them."""
        if not self.refresh_s:
            return [(c.num_waiting, c.kv_usage) for c in fleet]
        n, every, now = len(fleet), self.refresh_s, self.now
        if not self._next:  # one ticker per copy, started at spread phases
            self._seen = [(c.num_waiting, c.kv_usage) for c in fleet]
            self._next = [now + every * (i + 1) / n for i in range(n)]
        for i, c in enumerate(fleet):
            if now >= self._next[i]:
                self._seen[i] = (c.num_waiting, c.kv_usage)
                self._next[i] += every * (int((now - self._next[i]) / every) + 1)
        return self._seen

    def pick(self, req: RoutedRequest, fleet: Sequence[Copy]) -> int:
        n = len(fleet)
        wp, wk, wq = self.weights
        score = [0.0] * n
        seen = self._metrics(fleet) if wq or wk else []
        if wq:
            queues = [q for q, _ in seen]
            lo, hi = min(queues), max(queues)
            for i, q in enumerate(queues):
                score[i] += wq * (1.0 if hi == lo else (hi - q) / (hi - lo))
        if wk:
            for i, (_, usage) in enumerate(seen):
                score[i] += wk * (1.0 - usage)
        keys = req.keys
        if wp and self.approximate is not None:
            capacity, limit = self.approximate
            if not self.index:
                self.index = [LruTier(capacity) for _ in range(n)]
            keys = keys[:limit]
            if keys:
                for i, tier in enumerate(self.index):
                    score[i] += wp * tier.match(keys) / len(keys)
        elif wp:
            held = [c.holds(keys) for c in fleet]
            some = [h for h in held if h]
            if some:
                lo, hi = min(some), max(some)
                for i, h in enumerate(held):
                    if h:
                        score[i] += wp * (1.0 if hi == lo else (h - lo) / (hi - lo))
        best = max(score)
        ties = [i for i, v in enumerate(score) if v >= best - 1e-12]
        pick = ties[0] if len(ties) == 1 else self.rng.choice(ties)
        if self.approximate is not None and wp and keys:
            self.index[pick].insert(keys)
        return pick


def make_router(name: str, rng: random.Random, *, chunk_size: int, prefix_length_bytes: int,
                concurrency_threshold: int, busy_at: int, per_instance: int = 1) -> Router:
    """``per_instance``: copies on each instance (``prefix_aware`` spills within one first)."""
    if name == "random":
        return RandomRouter(rng)
    if name == "least_outstanding":
        return LeastOutstanding()
    if name == "sticky_session":
        return StickySession()
    if name == "prefix_aware":
        return PrefixAware(prefix_length_bytes, concurrency_threshold, chunk_size,
                           per_instance)
    if name == "kv_aware":
        return KvAware(busy_at)
    raise ValueError(f"unknown routing {name!r}; valid: {', '.join(ROUTINGS)}")
