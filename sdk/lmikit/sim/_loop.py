"""The discrete-event loop: requests arrive, are routed, queue, prefill, decode, finish.

Each model copy is one GPU timeline with continuous batching. The rules, each unit-tested and
each with its vLLM, LMCache or Envoy source in docs/planner-model.md, "The event loop":

0. A routed request queues after vLLM's API server has tokenized its prompt (not when it is
   sent as token ids).
1. Admission and preemption follow vLLM v1's scheduler: ``max_batch_size`` requests at most,
   room in the GPU block pool for the next step (and, from vLLM 0.19, for the whole uncached
   prompt: ``CopyConfig.reserve_full_prompt``); the newest admitted request is preempted when
   the pool is overfull, checked at events rather than at every step.
2. Admitted requests prefill one after the other, looking up the GPU prefix cache, then
   LMCache's CPU, disk and remote tiers; chunked prefill mixes decode steps into its steps.
3. The first token comes when the prefill ends, plus ``request_overhead_s``.
4. Running requests decode together, one token each per step.
5. A finished request's chunks stay cached; freed room is reused oldest first; every tier
   evicts least recently used chunks; the remote tier is shared by every copy.
6. A front door holding at most ``max_in_flight`` requests fails the ones past it at once
   (Envoy's circuit breaker in front of an endpoint picker).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from lmikit.sim._engine import EngineModel
from lmikit.sim._routers import Router
from lmikit.sim._tiers import GpuCache, LruTier, UnboundedTier
from lmikit.sim._work import Request, Workload

ARRIVE, PREFILL_DONE, DECODE, ENQUEUE = 0, 1, 2, 3
LMCACHE_TIERS = ("cpu", "disk", "remote")


@dataclass(frozen=True)
class CopyConfig:
    """One model copy: its engine, GPU pool, batch limit and LMCache tiers (tokens)."""

    engine: EngineModel
    gpu_tokens: int
    chunk_size: int
    max_batch_size: int
    cpu_tokens: int = 0
    disk_tokens: int = 0
    remote: bool = False
    # vLLM's ``scheduler_reserve_full_isl`` (vLLM 0.19.0 on, default True): admit a request
    # only when its whole uncached prompt fits the free pool, not just its next chunk
    reserve_full_prompt: bool = True
    # LMCache writes a disk or remote hit back to its CPU tier (``StorageManager.batched_get``
    # in the PyPI wheels of 0.3.15 and 0.5.6; not up to 0.3.9): a later hit is a CPU hit
    write_back: bool = True

    @property
    def lmcache(self) -> bool:
        return self.cpu_tokens > 0 or self.disk_tokens > 0 or self.remote


class _Copy:
    __slots__ = ("cfg", "engine", "gpu", "tiers", "outstanding", "waiting", "queue",
                 "current", "running", "decode_clock", "last", "rate", "ctx_const", "resv",
                 "active", "busy", "version", "prefill_rate", "seq", "static", "base",
                 "base_sum", "resumed", "stalled", "pf", "peak", "spare", "spare_t", "cpu",
                 "tail_keys", "recovered", "local")

    def __init__(self, cfg: CopyConfig, remote: LruTier) -> None:
        self.cfg = cfg
        self.engine = cfg.engine
        chunk = cfg.chunk_size
        self.gpu = GpuCache(cfg.gpu_tokens // chunk, chunk)
        tiers: list[tuple[str, LruTier]] = []
        if cfg.cpu_tokens:
            tiers.append(("cpu", LruTier(cfg.cpu_tokens // chunk, refresh=False)))
        if cfg.disk_tokens:
            tiers.append(("disk", LruTier(cfg.disk_tokens // chunk)))
        if cfg.remote:
            tiers.append(("remote", remote))
        self.tiers = tiers
        self.local = [tier for name, tier in tiers if name != "remote"]
        self.cpu = tiers[0][1] if tiers and tiers[0][0] == "cpu" else None
        self.outstanding = 0
        self.waiting: deque[Request] = deque()
        self.queue: deque[Request] = deque()
        self.current: Request | None = None
        self.running: list[tuple[float, int, Request]] = []
        self.decode_clock = 0.0
        self.last = 0.0
        self.rate = 0.0
        self.ctx_const = 0.0
        self.resv: dict[int, tuple[int, int]] = {}  # request -> (pinned chunks, private)
        self.static = 0  # private tokens of admitted requests other than generated ones
        self.base: dict[int, float] = {}  # running request -> decode_clock at which it had 0 tokens
        self.base_sum = 0.0
        self.resumed: dict[int, int] = {}  # preempted request -> tokens it had generated
        # preempted request -> the keys its prompt's tail and its output were freed under,
        # then, once readmitted, how many of those chunks it found still cached
        self.tail_keys: dict[int, range] = {}
        self.recovered: dict[int, int] = {}
        self.active = 0
        self.busy = 0.0
        self.version = 0
        self.seq = 0
        self.prefill_rate = 0.0
        self.stalled = False  # the current prefill waits for room for its next chunk
        # the current prefill: [tokens it takes in all, taken so far, of which retrieved,
        # hit tokens, new tokens, retrieve seconds, store seconds]
        self.pf: list[float] = []
        self.peak = 0.0  # highest KV usage seen after an event
        # prompt tokens the last prefill's last step left of its budget, and when it ended:
        # a prefill starting then computes that many of its tokens in that step
        self.spare = 0
        self.spare_t = -1.0

    def step_chunk(self) -> int:
        """Prompt tokens one step computes: vLLM's budget less a token per running decode."""
        return self.engine.step_budget(len(self.running))

    @property
    def queued(self) -> int:
        return len(self.waiting) + len(self.queue)

    @property
    def num_waiting(self) -> int:
        """vLLM's ``num_requests_waiting``: requests its scheduler would not start next step.

        vLLM v1 takes arriving requests into its waiting queue before it schedules a step and
        reports the queue after the step (``EngineCoreProc.run_busy_loop``: the input queue,
        then ``step``: ``schedule``, execute, ``update_from_output`` -> ``make_stats``,
        ``num_waiting_reqs = len(self.waiting)``; vLLM 0.10.1.1), and a step starts waiting
        requests while its token budget lasts, the last one in part
        (``while self.waiting and token_budget > 0``). So a request counts while the pool or
        ``max_num_seqs`` keeps it out (not admitted here) or the step's budget is spent
        before its turn: the running prefill's remaining tokens, then each admitted
        request's uncached prompt in order. The loop runs admitted prefills one after the
        other, so :attr:`queued` counts every admitted request whose prefill has not begun.
        The loop does not track steps within a prefill: one that computes more than a
        step's budget is taken to spend all of it, one that computes less to leave the rest.
        """
        left = self.step_chunk()
        if self.current is not None and self.pf:
            computes = int(self.pf[0] - self.pf[2])  # its tokens less those it loads
            left = 0 if computes >= left else left - computes
        n = len(self.waiting)
        chunk = self.cfg.chunk_size
        for r in self.queue:
            if left <= 0:
                n += 1
            left -= max(1, r.prompt_tokens - self.resv[r.id][0] * chunk)
        return n

    @property
    def kv_usage(self) -> float:
        """Share of the GPU pool in use by admitted requests (vLLM's KV cache usage)."""
        return self.gpu.used_chunks() / self.gpu.pool if self.gpu.pool else 1.0

    def sync(self) -> None:
        """Private tokens now: prompt tails and uncomputed chunks + every generated token."""
        if self.running:
            self.gpu.private = self.static + math.ceil(
                len(self.running) * self.decode_clock - self.base_sum - 1e-6)
        else:
            self.gpu.private = self.static

    def holds(self, keys: Sequence[int]) -> int:
        """Chunks of ``keys`` this copy holds locally (GPU, then LMCache), as a prefix."""
        n = self.gpu.match(keys)
        local = 0
        for tier in self.local:
            local += tier.match(keys, local)
        return n if n > local else local


@dataclass
class RunResult:
    """Per-request outcomes (indexed by request id) and per-copy statistics."""

    arrival: list[float]
    ttft: list[float]
    end: list[float]
    # tier -> prompt tokens it served, per request: those of its last prefill (a request
    # preempted and prefilled again is counted once, as it was served the last time)
    served: dict[str, list[int]]
    copy_of: list[int]
    busy_s: list[float]
    evictions: dict[str, int] = field(default_factory=dict)
    makespan_s: float = 0.0
    peak_kv_usage: list[float] = field(default_factory=list)  # per copy, after each event
    failed: list[bool] = field(default_factory=list)  # turned away at the front door (rule 6)


def run(workload: Workload, copies: Sequence[CopyConfig], router: Router,
        rng: random.Random | None = None, max_in_flight: int = 0) -> RunResult:
    """Simulate ``workload`` on ``copies`` routed by ``router``; deterministic.

    With ``rng``, think times are exponential with the phase's mean and users start at
    uniform offsets within one think time (real users do not move in lockstep); without
    it, think times are exactly the mean and every user starts at once. With
    ``max_in_flight``, requests beyond that many outstanding fail at once (rule 6).
    """
    if max_in_flight < 0:
        raise ValueError(f"max_in_flight must be 0 (no limit) or more, not {max_in_flight}")
    return _Run(workload, copies, router, rng, max_in_flight).run()


class _Run:
    """One run of the loop: its fleet, its events, the phase under way, and the results."""

    def __init__(self, workload: Workload, copies: Sequence[CopyConfig], router: Router,
                 rng: random.Random | None, max_in_flight: int) -> None:
        shared_remote = UnboundedTier()  # one remote store behind every copy
        self.fleet = [_Copy(config, shared_remote) for config in copies]
        self.router = router
        self.rng = rng
        self.max_in_flight = max_in_flight
        n = max((r.id for r in workload.requests), default=-1) + 1
        self.next_turn: dict[int, Request | None] = {}
        for p in workload.phases:
            for s in p.sessions:
                for a, b in zip(s, [*s[1:], None], strict=True):
                    self.next_turn[a.id] = b
        self.result = RunResult([0.0] * n, [math.nan] * n, [math.nan] * n,
                             {t: [0] * n for t in ("gpu", *LMCACHE_TIERS)}, [-1] * n,
                             [0.0] * len(self.fleet), failed=[False] * n)
        self.in_flight = 0
        self.events: list[tuple[float, int, int, object, int]] = []
        self.pushed = 0  # events pushed so far: at a tie in time, the first pushed is first
        self.phases = workload.phases
        self.phase = -1  # the phase under way
        self.left = 0  # its requests not yet over
        self.queue: deque[list[Request]] = deque()  # its sessions no user has started
        # A router with a clock (``Epp``'s metric scrapes) has ``now`` set before each pick; one
        # that tracks its own state per request (connections) hears of each finish.
        self.clocked: Any = router if hasattr(router, "now") else None
        self.on_finish: Callable[[int, float], object] | None = getattr(router, "finished", None)
        # A router that indexes which copies it sent each prompt's chunks to (``KvAware``)
        # starts afresh with this fleet, and hears of each chunk a copy caches for a request
        # not routed there (an answer's, for the session's next turn).
        self.note: Callable[[int, Sequence[int], int], None] | None = None
        if hasattr(router, "holders") and hasattr(router, "note"):
            cast(Any, router).holders = {}
            self.note = router.note

    def push(self, t: float, kind: int, obj: object, version: int = 0) -> None:
        self.pushed += 1
        heapq.heappush(self.events, (t, self.pushed, kind, obj, version))

    def start_phase(self, i: int, t: float) -> None:
        while i < len(self.phases) and not self.phases[i].sessions:
            i += 1
        self.phase = i
        if i >= len(self.phases):
            return
        p = self.phases[i]
        self.left = sum(len(s) for s in p.sessions)
        self.queue.clear()
        if p.open_loop:
            for s in p.sessions:
                for r in s:
                    self.push(t + (r.arrival_s or 0.0), ARRIVE, r)
            return
        if p.dispatcher is not None:
            for r in p.dispatcher.start():
                self.push(t, ARRIVE, r)
            return
        self.queue.extend(p.sessions)
        for _ in range(min(p.concurrency, len(self.queue))):
            offset = self.rng.uniform(0, p.think_time_s) if self.rng and p.think_time_s else 0.0
            self.push(t + offset, ARRIVE, self.queue.popleft()[0])

    def advance(self, copy: _Copy, t: float) -> None:
        dt = t - copy.last
        if dt > 0:
            if copy.rate:
                copy.decode_clock += dt * copy.rate
            if copy.current is not None or copy.running:
                copy.busy += dt
        copy.last = t

    def reschedule(self, copy: _Copy, t: float) -> None:
        copy.version += 1
        n_running = len(copy.running)
        if not n_running:
            copy.rate = 0.0
            return
        if copy.current is not None and not copy.stalled:
            copy.rate = copy.prefill_rate
            if not copy.rate:
                return
            step = 1.0 / copy.rate
        else:
            held = int(copy.ctx_const + n_running * copy.decode_clock)
            step = copy.engine.decode_step_s(n_running, held)
            copy.rate = 1.0 / step
        target = copy.running[0][0]
        # the pool fills up before then: preempt there
        if n_running > 1 or copy.queue or copy.stalled:
            copy.sync()
            free = copy.gpu.free_tokens()
            fills = copy.decode_clock + ((free if free > 0 else 0) + 1) / n_running
            if fills < target:
                target = fills
        ahead = target - copy.decode_clock
        when = t + (ahead if ahead > 0.0 else 0.0) * step
        if when <= t and ahead * n_running > 1e-6:
            # so little decoding is left that the clock cannot resolve it (far out, ~3e8 s
            # on: a float's step there is ~6e-8 s), yet more than the tolerance the finish
            # and pool checks allow (1e-6 of a token, over the batch): it is done now, or
            # the same event would be pushed for ever with nothing moving
            copy.decode_clock = target
        self.push(when, DECODE, copy, copy.version)

    def release(self, copy: _Copy, r: Request, computed: Sequence[int] = (),
                generated: int = 0) -> None:
        """Back to the front of the waiting queue, its blocks freed (vLLM's preemption).

        ``computed``: full chunks it computed beyond the ones it pinned, which stay cached;
        ``generated``: tokens it had generated. vLLM frees a request's blocks tail first
        (rule 5), so the rest of its blocks go first, then those, then its pinned prefix.
        """
        pinned, own = copy.resv.pop(r.id)
        copy.static -= own
        copy.sync()
        chunk = copy.cfg.chunk_size
        freed = copy.gpu.free(own + generated - len(computed) * chunk)
        copy.recovered.pop(r.id, None)
        if generated:
            copy.tail_keys[r.id] = freed
        copy.gpu.insert(computed)
        copy.gpu.unpin(r.keys[:pinned])
        copy.active -= 1
        copy.waiting.appendleft(r)
        copy.sync()

    def preempt(self, copy: _Copy) -> bool:
        """Send the newest admitted requests back to waiting while the pool is overfull.

        Newest first, as vLLM pops the end of its running list: requests admitted but not
        yet prefilling, then a prefill stalled for room, then decoding requests. The caller
        has synced ``copy``.
        """
        preempted = False
        while copy.gpu.free_tokens() < 0:
            if copy.queue:
                self.release(copy, copy.queue.pop())
            elif copy.stalled:
                assert copy.current is not None
                r = copy.current
                g, _ = copy.resv[r.id]
                # the full chunks it computed stay in the GPU prefix cache once freed
                done = g + int(copy.pf[1]) // copy.cfg.chunk_size
                self.release(copy, r, r.keys[g:min(done, len(r.keys))])
                copy.current = None
                copy.stalled = False
            elif len(copy.running) > 1:
                k = max(range(len(copy.running)), key=lambda j: copy.running[j][1])
                _, _, r = copy.running.pop(k)
                heapq.heapify(copy.running)
                b = copy.base.pop(r.id)
                copy.base_sum -= b
                copy.ctx_const -= r.prompt_tokens - b
                copy.resumed[r.id] = int(copy.decode_clock - b + 1e-6)
                self.release(copy, r, generated=copy.resumed[r.id])
            else:
                break
            preempted = True
        return preempted

    def admit(self, copy: _Copy, t: float) -> bool:
        """Admit waiting requests while they fit, and start the next prefill if none runs.
        True when the last thing it did was start a prefill segment, which re-planned the
        copy's decode event (nothing changed after it, so the caller need not)."""
        cfg = copy.cfg
        chunk = cfg.chunk_size
        gpu = copy.gpu
        if copy.stalled:
            self.segment(copy, t)
            if copy.stalled:  # first come, first served: nothing is admitted behind it
                return False
        while copy.waiting and copy.active < cfg.max_batch_size:
            r = copy.waiting[0]
            keys = r.keys
            g = gpu.match(keys)
            # vLLM allocates blocks for the prefix-cache hits and the next chunk only; from
            # 0.19.0 it first checks that the whole uncached prompt fits the free pool
            whole = r.prompt_tokens - g * chunk + copy.resumed.get(r.id, 0)
            first = min(whole, copy.step_chunk())
            fits = whole if cfg.reserve_full_prompt else first
            copy.sync()
            if copy.active and fits + gpu.unpinned(keys[:g]) * chunk > gpu.free_tokens():
                break
            copy.waiting.popleft()
            copy.active += 1
            # a preempted request finds its prompt's tail and what it had generated still
            # cached unless evicted, after its whole prompt (vLLM hashes generated blocks
            # too, ``Request.append_output_token_ids``, and ``get_computed_blocks`` matches
            # them before ``allocate_slots``): it takes them back, to load, not compute
            freed = copy.tail_keys.pop(r.id, None)
            if freed is not None and g == len(keys):
                copy.recovered[r.id] = gpu.take(freed)
            gpu.pin(keys[:g])
            copy.static += first
            gpu.private += first  # synced above: what sync() gives now
            copy.resv[r.id] = (g, first)
            gpu.shrink()
            copy.queue.append(r)
        if copy.current is None and copy.queue:
            return self.start_prefill(copy, t)
        return False

    def join(self, copy: _Copy, r: Request, t: float) -> None:
        """A tokenized request joins its copy's waiting queue. Admitting it may queue it or
        stall a prefill, so the pool fills sooner: the decode event is re-planned."""
        copy.waiting.append(r)
        self.advance(copy, t)
        if not self.admit(copy, t):
            self.reschedule(copy, t)

    def start_prefill(self, copy: _Copy, t: float) -> bool:
        """Start the next admitted request's prefill (every caller has advanced ``copy`` to t)."""
        r = copy.queue.popleft()
        copy.current = r
        chunk = copy.cfg.chunk_size
        keys = r.keys
        eng = copy.engine
        retrieve = 0.0
        g0, own = copy.resv[r.id]
        lookup = 0.0
        if r.forced is not None:
            served: dict[str, int] = {}
            hit = 0
            for forced_tier, cached in r.forced:
                served[forced_tier] = cached
                hit += cached
                retrieve += eng.retrieve_s(forced_tier, cached)
            stored = max(0, len(keys) * chunk - hit) if copy.cfg.lmcache else 0
            if copy.cfg.lmcache:
                lookup = eng.lookup_s(len(keys), served.get("remote", 0) // chunk)
            g = g0
        else:
            g = copy.gpu.match(keys)
            if g > g0:  # computed by another request since admission: pin and use it
                copy.gpu.pin(keys[g0:g])
                cut = min(own, (g - g0) * chunk)
                copy.static -= cut
                copy.resv[r.id] = (g, own - cut)
            served = {"gpu": g * chunk}
            pos = 0
            checked = 0  # chunks asked of the remote store, one after another
            found: list[tuple[str, LruTier, int, int]] = []
            for name, tier in copy.tiers:
                if pos == len(keys):  # every chunk found: LMCache asks no further tier
                    break
                m = tier.match(keys, pos)
                if name == "remote":
                    checked = m + (1 if pos + m < len(keys) else 0)
                if m:
                    found.append((name, tier, pos, m))
                pos += m
            back = copy.cpu if copy.cfg.write_back else None
            for name, tier, start, m in found:
                tier.touch(keys[start:start + m])
                lo = max(start, g)
                if start + m > lo:
                    tokens = (start + m - lo) * chunk
                    served[name] = tokens
                    retrieve += eng.retrieve_s(name, tokens)
                    if name == "remote" and len(found) > 1:
                        # the lookup found the hit in more than one tier: the retrieve
                        # asks each tier again (LMCacheEngine._process_tokens_internal ->
                        # StorageManager.get_block_mapping), inside the step
                        retrieve += eng.remote_contains_s(start + m - lo)
                    if back is not None and tier is not back:
                        back.insert(keys[lo:start + m])
            hit = max(g, pos) * chunk
            stored = (len(keys) - pos) * chunk if copy.tiers else 0
            if copy.tiers:
                lookup = eng.lookup_s(len(keys), checked)
        for name, per_request in self.result.served.items():
            per_request[r.id] = served.get(name, 0)
        resumed = copy.resumed.get(r.id, 0)
        # what a preempted request found still cached at admission takes room but no
        # compute, as a load does
        hit += copy.recovered.pop(r.id, 0) * chunk
        # vLLM computes at least the prompt's last token, for its logits: a prompt whose every
        # token hits prefills that one (vLLM ``KVCacheManager.get_computed_blocks`` caps the
        # hit at ``num_tokens - 1``; LMCache's ``vllm_v1_adapter.get_num_new_matched_tokens``
        # recomputes the last token of a full-prompt hit)
        new_tokens = max(1, r.prompt_tokens - hit + resumed)
        total = max(new_tokens, r.prompt_tokens - g * chunk + resumed)
        # [tokens it takes, taken so far, of which loaded, hit tokens, new tokens, seconds
        # of lookup and loads, chunks LMCache has stored of it, the position its first
        # token takes in the prompt]
        copy.pf = [total, 0, total - new_tokens, hit, new_tokens, lookup + retrieve,
                len(keys) - stored // chunk, g * chunk]
        return self.segment(copy, t)

    def segment(self, copy: _Copy, t: float) -> bool:
        """Run the current prefill as far as the pool has room, or stall it; True when it
        ran (and re-planned the decode event), False when it stalled.

        vLLM allocates each step's blocks as the step computes (``allocate_slots``): a
        prefill needs room for its next chunk (and the tiers' hits it loads) to go on; when
        it has none, the requests admitted after it are preempted first, then it waits for
        finishing requests to free room, keeping what it computed. Its segment stops
        where the room left ends, less what the running decodes take meanwhile.
        """
        r = copy.current
        assert r is not None
        total, taken, retrieved, hit, new_tokens, load_s, stored, offset = copy.pf
        left = int(total - taken)
        g, own = copy.resv[r.id]
        n_running = len(copy.running)
        ch = copy.step_chunk()
        need = int(retrieved) + min(int(new_tokens), ch) if taken == 0 else min(left, ch)
        copy.sync()
        while own - taken + copy.gpu.free_tokens() < need and copy.queue:
            self.release(copy, copy.queue.pop())
        room = int(own - taken) + copy.gpu.free_tokens()
        if left <= room or not (copy.running or copy.queue):  # a prompt bigger than the pool
            m = left
        else:
            m = room - n_running * -(-room // ch)
            if m < need:
                copy.stalled = True
                return False
        copy.stalled = False
        grow = int(taken) + m - own
        if grow > 0:
            copy.static += grow
            copy.resv[r.id] = (g, own + grow)
            copy.sync()
            copy.gpu.shrink()
        first = taken == 0
        loads = int(retrieved) if first else 0
        computed = int(taken) - int(retrieved) if not first else 0
        k = m - loads
        # LMCache loads a hit before the forward of the step that schedules the request
        # (``start_load_kv``), and after each step stores the full chunks that step
        # completed (``wait_for_save``), each blocking the step for every request in it
        duration = load_s if first else 0.0
        chunk = copy.cfg.chunk_size
        upto = min(len(r.keys), (int(offset + taken) + m) // chunk)
        if upto > stored:
            duration += copy.engine.store_s((upto - int(stored)) * chunk)
            if r.forced is None:  # LMCache puts each stored chunk into every tier
                done = r.keys[int(stored):upto]
                for _, tier in copy.tiers:
                    tier.insert(done)
            copy.pf[6] = float(upto)
        ends = taken + m >= total
        ctx = int(hit) + computed
        # vLLM fills a step's token budget from the next waiting request: the prompt tokens
        # that go into the step the last prefill ended with add only their FLOPs to it
        packed = min(k, copy.spare) if first and copy.spare_t == t else 0
        duration += copy.engine.packed_prefill_s(packed, ctx)
        rest = k - packed
        copy.pf[1] = taken + m
        copy.prefill_rate = 0.0
        if rest or not packed:
            if n_running:
                # chunked prefill: each step of the token budget also advances every decode
                held = int(copy.ctx_const + n_running * copy.decode_clock)
                body, steps = copy.engine.mixed_prefill_s(rest, ctx + packed, n_running, held)
                duration += body
                copy.prefill_rate = steps / duration if duration > 0 else 0.0
            else:
                duration += copy.engine.prefill_s(rest, ctx + packed)
            copy.spare = -rest % ch  # what its last step leaves of the budget
        else:
            copy.spare -= packed
        copy.spare_t = t + duration if ends else -1.0
        # its end first, then the decode event: at a tie the prefill's end comes first
        self.push(t + duration, PREFILL_DONE, copy)
        self.reschedule(copy, t)
        return True

    def finish(self, r: Request, copy: _Copy, t: float) -> None:
        self.result.end[r.id] = t
        if self.on_finish is not None:
            self.on_finish(r.id, t)
        copy.outstanding -= 1
        copy.active -= 1
        pinned, own = copy.resv.pop(r.id)
        copy.static -= own
        copy.sync()
        # its blocks are freed tail first (rule 5): the prompt's partial last chunk and the
        # output, then the prompt's chunks; vLLM caches the output's full blocks the
        # session's next turn repeats, the rest is room no prompt names
        follow, k, chunk = self.next_turn[r.id], len(r.keys), copy.cfg.chunk_size
        repeated: Sequence[int] = ()
        if follow is not None and follow.keys[:k] == r.keys:
            repeated = follow.keys[k:(r.prompt_tokens + r.output_tokens) // chunk]
        copy.gpu.free(own + r.output_tokens - len(repeated) * chunk)
        if repeated:
            copy.gpu.insert(repeated)
            if self.note is not None and follow is not None:
                self.note(self.result.copy_of[r.id], follow.keys[:k + len(repeated)], k)
        copy.gpu.unpin(r.keys[:pinned])
        self.proceed(r, t)

    def proceed(self, r: Request, t: float) -> None:
        """``r`` is over, served or failed: its session, phase and users go on."""
        self.in_flight -= 1
        follow = self.next_turn[r.id]
        p = self.phases[self.phase]
        if p.dispatcher is not None:
            for later in p.dispatcher.finished(r.id):
                self.push(t, ARRIVE, later)
        elif follow is not None:
            think = p.think_time_s
            if self.rng is not None and think > 0:
                think = self.rng.expovariate(1.0 / think)
            self.push(t + think, ARRIVE, follow)
        elif self.queue:
            self.push(t, ARRIVE, self.queue.popleft()[0])
        self.left -= 1
        if self.left == 0:
            self.start_phase(self.phase + 1, t)

    def run(self) -> RunResult:
        self.start_phase(0, 0.0)
        t = last = 0.0  # last: the time of the last event that changed anything
        touched: _Copy | None = None
        while self.events:
            if touched is not None:
                touched.sync()
                usage = touched.kv_usage
                if usage > touched.peak:
                    touched.peak = usage
            t, _, kind, obj, version = heapq.heappop(self.events)
            if kind == DECODE and isinstance(obj, _Copy) and version != obj.version:
                touched = None  # its peak is taken: nothing changed since
                continue  # a decode end since rescheduled: nothing happens at t
            last = t
            if kind == ARRIVE:
                assert isinstance(obj, Request)
                r = obj
                self.result.arrival[r.id] = t
                if self.clocked is not None:
                    self.clocked.now = t
                self.in_flight += 1
                if self.max_in_flight and self.in_flight > self.max_in_flight:
                    self.result.failed[r.id] = True
                    self.result.end[r.id] = t
                    self.proceed(r, t)
                    continue
                i = self.router.pick(r, self.fleet)
                self.result.copy_of[r.id] = i
                copy = self.fleet[i]
                copy.outstanding += 1
                tokenize = (0.0 if r.pretokenized
                            else r.prompt_tokens * copy.engine.coeff.tokenize_s_per_token)
                if tokenize > 0:  # nothing on the copy changed yet: no peak to take
                    touched = None
                    self.push(t + tokenize, ENQUEUE, r, i)
                    continue
                touched = copy
                self.join(copy, r, t)
            elif kind == ENQUEUE:
                assert isinstance(obj, Request)
                copy = self.fleet[version]
                touched = copy
                self.join(copy, obj, t)
            elif kind == PREFILL_DONE:
                assert isinstance(obj, _Copy)
                copy = obj
                touched = copy
                self.advance(copy, t)
                assert copy.current is not None
                if copy.pf[1] < copy.pf[0]:  # a segment of the prefill: go on, or stall for room
                    if not self.segment(copy, t):
                        self.reschedule(copy, t)
                    continue
                r = copy.current
                copy.current = None
                before = copy.resumed.pop(r.id, None)
                if before is None:
                    self.result.ttft[r.id] = t + copy.engine.coeff.request_overhead_s
                done_g, own = copy.resv[r.id]
                n_keys = len(r.keys)
                moved = (n_keys - done_g) * copy.cfg.chunk_size + (before or 0)
                if n_keys > done_g:  # the computed chunks join the pool, pinned while it runs
                    copy.gpu.pin(r.keys[done_g:])
                copy.static -= moved  # generated tokens are counted from here on as they grow
                copy.resv[r.id] = (n_keys, own - moved)
                generated = (before or 0) + 1
                if generated >= r.output_tokens:
                    end = t + copy.engine.coeff.request_overhead_s
                    self.result.end[r.id] = end
                    self.finish(r, copy, end)
                else:
                    copy.seq += 1
                    zero = copy.decode_clock - generated
                    heapq.heappush(copy.running, (zero + r.output_tokens, copy.seq, r))
                    copy.base[r.id] = zero
                    copy.base_sum += zero
                    copy.ctx_const += r.prompt_tokens - zero
                copy.sync()
                copy.gpu.shrink()
                # its first output token may need a block
                if self.preempt(copy) or not self.admit(copy, t):
                    self.reschedule(copy, t)
            else:
                assert isinstance(obj, _Copy)
                copy = obj
                touched = copy
                self.advance(copy, t)
                done = []
                while copy.running and copy.running[0][0] <= copy.decode_clock + 1e-6:
                    _, _, r = heapq.heappop(copy.running)
                    zero = copy.base.pop(r.id)
                    copy.base_sum -= zero
                    copy.ctx_const -= r.prompt_tokens - zero
                    done.append(r)
                for r in done:
                    self.finish(r, copy, t + copy.engine.coeff.request_overhead_s)
                copy.sync()
                if self.preempt(copy) or not self.admit(copy, t):
                    self.reschedule(copy, t)
        # not a stale event's time, which may lie past the work's end
        self.result.makespan_s = last
        for i, copy in enumerate(self.fleet):
            self.advance(copy, last)
            self.result.busy_s[i] = copy.busy
        self.result.peak_kv_usage = [copy.peak for copy in self.fleet]
        self.result.evictions = {"gpu": sum(copy.gpu.evictions for copy in self.fleet)}
        for name in LMCACHE_TIERS:
            self.result.evictions[name] = sum({id(tier): tier.evictions for copy in self.fleet
                                            for tn, tier in copy.tiers if tn == name}.values())
        return self.result
