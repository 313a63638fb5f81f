"""inference-perf's client as the llm-d rebuilds model it: workers, permits, connections."""

from __future__ import annotations

import doctest
import importlib
import random

import pytest

from lmikit.sim._loop import run
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import llmd
from tests.unit.sim import llmd_reasoning as reasoning
from tests.unit.sim import llmd_service as service
from tests.unit.sim.inference_perf import (
    VLLM_KEEPALIVE_S,
    ConcurrentWorkers,
    KeepAliveService,
    concurrent_load,
)


class _R:
    def __init__(self, i: int) -> None:
        self.id = i


@pytest.mark.parametrize("name", ["tests.unit.sim.inference_perf",
                                  "tests.unit.sim.llmd_codegen",
                                  "tests.unit.sim.llmd_reasoning"])
def test_the_rebuilds_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_request_takes_the_connection_idle_longest() -> None:
    # aiohttp's connector: released connections are appended, reused from the left
    svc = KeepAliveService(random.Random(0), workers=1, worker_of=lambda r: 0)
    fleet = [None] * 1000
    pods = [svc.pick(_R(i), fleet) for i in range(3)]
    assert svc.opened == 3
    svc.finished(1, 1.0)
    svc.finished(0, 2.0)
    svc.now = 2.5
    assert svc.pick(_R(3), fleet) == pods[1]  # idle since 1.0, before request 0's
    assert svc.pick(_R(4), fleet) == pods[0]
    assert svc.opened == 3


def test_the_servers_keep_alive_closes_an_idle_connection() -> None:
    assert VLLM_KEEPALIVE_S == 5.0  # vLLM 0.19.0 envs.py, VLLM_HTTP_TIMEOUT_KEEP_ALIVE
    svc = KeepAliveService(random.Random(0), workers=1, worker_of=lambda r: 0)
    svc.pick(_R(0), [None] * 8)
    svc.finished(0, 10.0)
    svc.now = 15.0  # idle exactly 5 s: still open
    svc.pick(_R(1), [None] * 8)
    assert svc.opened == 1
    svc.finished(1, 20.0)
    svc.now = 25.01
    svc.pick(_R(2), [None] * 8)
    assert svc.opened == 2


def test_connections_belong_to_their_worker_and_a_timed_out_one_is_dropped() -> None:
    svc = KeepAliveService(random.Random(0), workers=2, worker_of=lambda r: r.id % 2,
                           dropped={2})
    svc.pick(_R(0), [None] * 8)
    svc.finished(0, 1.0)
    svc.now = 1.5
    svc.pick(_R(1), [None] * 8)  # worker 1 cannot use worker 0's idle connection
    assert svc.opened == 2
    svc.pick(_R(2), [None] * 8)  # worker 0 reuses its own
    assert svc.opened == 2
    svc.finished(2, 3.0)  # cut by the client's timeout: its connection is closed
    svc.now = 3.5
    svc.pick(_R(4), [None] * 8)
    assert svc.opened == 3


def test_a_shared_queue_spreads_requests_over_random_workers() -> None:
    svc = KeepAliveService(random.Random(0), workers=64)
    for i in range(640):
        svc.pick(_R(i), [None] * 8)
    assert len({w for w, _ in svc.held.values()}) > 50


def test_a_turn_waits_for_its_sessions_previous_turn_holding_its_permit() -> None:
    # one worker, two permits, one session's three turns then another session's turn
    reqs = [Request(i, chunk_keys([(i + 1, 512)], 256), 512, 50, session=0) for i in range(4)]
    load = ConcurrentWorkers([[(reqs[0], "a"), (reqs[1], "a"), (reqs[2], "a"),
                               (reqs[3], "b")]], [2])
    work = Workload("t", [Phase("t", [[r] for r in reqs], concurrency=2, dispatcher=load)], 256)
    out = run(work, reasoning.copies()[:1], KeepAliveService(random.Random(0), workers=1))
    assert out.arrival[0] == 0.0
    # turn 1 is taken at once but waits for turn 0; turn 2 and b wait for permits
    assert out.arrival[1] == pytest.approx(out.end[0])
    assert out.arrival[2] == pytest.approx(out.end[1])
    assert out.arrival[3] == pytest.approx(out.end[1])  # turn 0's permit went to turn 2's wait


def test_the_reasoning_workers_reuse_their_connections() -> None:
    # a closed loop without timeouts: every later request takes the connection its worker
    # freed, so only the first round opens connections and each worker stays on its pods
    conc = 50
    work = reasoning.workload(conc)
    svc = reasoning.service(work, 1)
    out = run(work, reasoning.copies(), svc)
    assert svc.opened == conc
    for w in range(reasoning.WORKERS):
        first = {out.copy_of[i] for i in range(conc) if i % reasoning.WORKERS == w}
        later = {out.copy_of[i] for i in range(conc, 3 * conc)
                 if (i % conc) % reasoning.WORKERS == w}
        assert later <= first


def test_concurrent_load_sends_every_request_once() -> None:
    reqs = [Request(i, (), 1, 1, session=i % 7) for i in range(70)]
    load = concurrent_load(reqs, 7, 6, lambda i, r: (r.session, i // 7))
    sent = load.start()
    assert len(sent) == 7  # one permit per slot: 2 for worker 0, 1 for the others
    done: list[Request] = []
    while sent:
        r = sent.pop(0)
        done.append(r)
        sent += load.finished(r.id)
    assert sorted(r.id for r in done) == list(range(70))


def test_the_b2b_saas_stages_leave_almost_no_connection_to_reuse() -> None:
    # each stage waits for all its requests, most of which end after its last send, and
    # vLLM closes an idle connection after 5 s: nearly every request opens a new one
    work = llmd.workload(llmd.X73)
    svc = service.service(1)
    run(work, llmd.copies(llmd.X73, reserve_full_prompt=True), svc)
    assert svc.opened > 0.95 * len(work.requests)
