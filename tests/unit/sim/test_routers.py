from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from lmikit.sim._routers import (
    Epp,
    KvAware,
    LeastOutstanding,
    PrefixAware,
    RandomRouter,
    StickySession,
    make_router,
)


@dataclass
class C:
    outstanding: int = 0
    held: int = 0
    waiting: int | None = None
    kv_usage: float = 0.0

    @property
    def queued(self) -> int:
        return self.outstanding if self.waiting is None else self.waiting

    @property
    def num_waiting(self) -> int:  # the fakes report one count to both kinds of router
        return self.queued

    def holds(self, keys: object) -> int:
        return self.held


@dataclass(frozen=True)
class R:
    keys: tuple[int, ...] = (11, 22, 33, 44, 55)
    session: int = 1
    prefix_id: int | None = None
    extra: dict[str, int] = field(default_factory=dict)


def test_random_spreads_requests_over_every_copy() -> None:
    r = RandomRouter(random.Random(0))
    assert {r.pick(R(), [C(), C(), C()]) for _ in range(100)} == {0, 1, 2}


def test_least_outstanding_picks_the_fewest_in_flight() -> None:
    assert LeastOutstanding().pick(R(), [C(5), C(2), C(9)]) == 1


def test_sticky_session_pins_a_session_to_its_first_copy() -> None:
    r = StickySession()
    fleet = [C(), C(), C(), C()]
    first = r.pick(R(session=7), fleet)
    fleet[first].outstanding = 100
    assert all(r.pick(R(session=7), fleet) == first for _ in range(20))


def test_a_new_session_lands_as_least_outstanding_places_a_request() -> None:
    """SageMaker routes the NEW_SESSION request by the variant's RoutingStrategy, and
    lmikit renders LEAST_OUTSTANDING_REQUESTS for sticky sessions."""
    from lmikit.render._sagemaker import ROUTING

    assert ROUTING["sticky_session"] == "LEAST_OUTSTANDING_REQUESTS"
    r = StickySession()
    assert r.pick(R(session=1), [C(5), C(2), C(9)]) == 1
    assert r.pick(R(session=2), [C(5), C(7), C(0)]) == 2
    assert r.pick(R(session=1), [C(5), C(7), C(0)]) == 1  # pinned where it opened


def test_prefix_aware_hashes_the_prefix_length_worth_of_chunks() -> None:
    # 4096 bytes / 4 bytes per token = 1024 tokens = the 4th 256-token chunk key
    r = PrefixAware(4096, concurrency_threshold=8, chunk_size=256)
    fleet = [C() for _ in range(5)]
    assert r.pick(R(keys=(1, 2, 3, 40, 5)), fleet) == 40 % 5
    assert r.pick(R(keys=(1, 2, 3, 40, 99)), fleet) == 40 % 5  # same first 1024 tokens


def test_prefix_aware_routes_on_the_prefix_and_its_prefix_aware_id_together() -> None:
    # botocore, InvokeEndpointInput.PrefixAwareId: "The service routes requests with the
    # same prefix and the same identifier to the same instance" (one identifier per
    # application keeps applications with the same prompts apart); the id alone had sent an
    # application's every prompt to one copy
    r = PrefixAware(1024, concurrency_threshold=8, chunk_size=256)
    fleet = [C() for _ in range(4)]
    app = [r.pick(R(keys=(k,), prefix_id=13), fleet) for k in range(8)]
    assert len(set(app)) > 1
    assert r.pick(R(keys=(5,), prefix_id=13), fleet) == r.pick(R(keys=(5, 9), prefix_id=13),
                                                               fleet)
    ids = {r.pick(R(keys=(5,), prefix_id=p), fleet) for p in range(8)}
    assert len(ids) > 1  # the same prompt from different applications spreads


def test_prefix_aware_spills_at_the_concurrency_threshold() -> None:
    r = PrefixAware(1024, concurrency_threshold=2, chunk_size=256)
    fleet = [C(2), C(2), C(0)]
    assert r.pick(R(keys=(3,)), fleet) == 2  # home 0 and next 1 are at the threshold
    full = [C(2), C(5), C(3)]
    assert r.pick(R(keys=(3,)), full) == 0  # every copy at it: the least busy


def test_prefix_aware_spills_to_a_copy_on_the_same_instance_first() -> None:
    # botocore, PrefixAwareRoutingConfig.ConcurrencyThreshold: "to another copy on the
    # instance that is under the threshold. When every copy on the instance has reached the
    # threshold, the endpoint routes the request to another instance."
    r = PrefixAware(1024, concurrency_threshold=2, chunk_size=256, per_instance=2)
    # key 6 on 2 instances: instance 0, its copy 6 // 2 % 2 = 1 (copies 0 and 1 are
    # instance 0's, 2 and 3 instance 1's)
    assert r.pick(R(keys=(6,)), [C(), C(), C(), C()]) == 1
    assert r.pick(R(keys=(6,)), [C(), C(2), C(), C()]) == 0  # its neighbour on instance 0
    assert r.pick(R(keys=(6,)), [C(2), C(2), C(), C()]) == 3  # then instance 1, same slot
    assert r.pick(R(keys=(6,)), [C(2), C(2), C(5), C(3)]) == 0  # all full: least busy


def test_prefix_aware_needs_two_instances() -> None:
    # botocore, RoutingStrategy: "The endpoint applies prefix-aware routing only when two or
    # more instances can serve the request": two copies on one instance are routed as
    # least outstanding requests
    r = PrefixAware(1024, concurrency_threshold=8, chunk_size=256, per_instance=2)
    assert [r.pick(R(keys=(6,)), fleet) for fleet in ([C(3), C(1)], [C(0), C(4)])] == [1, 0]


def test_kv_aware_prefers_the_copy_holding_the_longest_prefix() -> None:
    assert KvAware(busy_at=8).pick(R(), [C(1, 0), C(1, 5), C(1, 2)]) == 1
    # score = held share + (most queued - queued) / spread: 4/5 + 1 beats 5/5 + 0
    assert KvAware(busy_at=8).pick(R(), [C(2, 5), C(1, 4)]) == 1


def test_kv_aware_weighs_held_prefix_against_queue() -> None:
    # holding 1 of 5 chunks does not beat a much shorter queue
    assert KvAware(busy_at=8).pick(R(), [C(0, 0), C(6, 1)]) == 0


def test_kv_aware_skips_busy_copies_and_falls_back_to_least_outstanding() -> None:
    assert KvAware(busy_at=4).pick(R(), [C(4, 5), C(1, 0), C(0, 0)]) == 2


def _kv_aware_by_its_formula(fleet: list[C], keys: tuple[int, ...], busy_at: int) -> int:
    """The documented rule, each open copy scored in turn: held share + (most queued - its
    queued) / (most queued - least queued); the first highest score, ties to the fewest in
    flight; least outstanding (from the router's rotating start) when none holds any."""
    open_ = [i for i, c in enumerate(fleet) if c.queued < busy_at]
    held = [fleet[i].holds(keys) for i in open_]
    if not any(held):
        return -1
    queues = [fleet[i].queued for i in open_]
    lo, hi = min(queues), max(queues)
    span = (hi - lo) or 1
    score = [(held[j] / len(keys) + (hi - queues[j]) / span, -fleet[i].outstanding)
             for j, i in enumerate(open_)]
    return open_[score.index(max(score))]


def test_kv_aware_picks_what_scoring_every_open_copy_picks() -> None:
    # small queues and holdings, so ties of every kind are common
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(1, 9)
        fleet = [C(rng.randint(0, 6), rng.choice([0, 0, 0, 1, 2, 5]), rng.randint(0, 5))
                 for _ in range(n)]
        busy_at = rng.randint(1, 6)
        want = _kv_aware_by_its_formula(fleet, R().keys, busy_at)
        if want >= 0:
            assert KvAware(busy_at).pick(R(), fleet) == want, (fleet, busy_at)


@dataclass
class Cache(C):
    """A copy holding a set of chunk keys, counted as a prefix (as ``_Copy.holds``)."""

    keys: set[int] = field(default_factory=set)
    asked: int = 0

    def holds(self, keys: object) -> int:
        self.asked += 1
        n = 0
        for k in keys:  # type: ignore[attr-defined]
            if k not in self.keys:
                break
            n += 1
        return n


@pytest.mark.parametrize("shared", [(), (1, 2)])
def test_kv_aware_with_its_index_picks_the_same_and_asks_few_copies(
        shared: tuple[int, ...]) -> None:
    # copies whose caches fill only from what was routed to them, then evict at random,
    # prompts with and without a start every prompt shares (a system prompt), some longer
    # than the index follows
    rng = random.Random(3)
    fleets = [[Cache() for _ in range(16)] for _ in range(2)]
    indexed, plain = KvAware(busy_at=3), KvAware(busy_at=3)
    indexed.holders = {}
    for _ in range(2000):
        first = rng.randint(1, 200)
        keys = shared + tuple(range(first * 100, first * 100 + rng.randint(1, 12)))
        load = [(rng.randint(0, 4), rng.randint(0, 4)) for _ in range(16)]
        picks = []
        for router, fleet in ((indexed, fleets[0]), (plain, fleets[1])):
            for c, (out, waiting) in zip(fleet, load, strict=True):
                c.outstanding, c.waiting = out, waiting
            picks.append(router.pick(R(keys=keys), fleet))
        assert picks[0] == picks[1]
        for fleet in fleets:
            fleet[picks[0]].keys.update(keys)
        dropped = rng.choice(sorted(fleets[0][picks[0]].keys))
        for fleet in fleets:
            fleet[picks[0]].keys.discard(dropped)
    asked = [sum(c.asked for c in fleet) for fleet in fleets]
    assert asked[0] < asked[1] / 3, asked


def test_make_router_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown routing 'round_robin'"):
        make_router("round_robin", random.Random(0), chunk_size=256, prefix_length_bytes=4096,
                    concurrency_threshold=4, busy_at=4)


def test_epp_reads_queues_as_last_scraped_every_refresh_interval() -> None:
    # one 50 ms ticker per copy, at spread phases (copy 0 at 25 ms, copy 1 at 50 ms)
    epp = Epp(random.Random(0), queue_weight=1.0, refresh_s=0.05)
    fleet = [C(waiting=0), C(waiting=5)]
    epp.now = 0.0
    assert epp.pick(R(), fleet) == 0
    fleet[0].waiting = 9  # copy 0 fills up; the picker has not scraped it yet
    epp.now = 0.01
    assert epp.pick(R(), fleet) == 0
    epp.now = 0.06  # both scraped since
    assert epp.pick(R(), fleet) == 1


def test_epp_without_a_refresh_interval_reads_live_queues() -> None:
    epp = Epp(random.Random(0), queue_weight=1.0)
    fleet = [C(waiting=0), C(waiting=5)]
    assert epp.pick(R(), fleet) == 0
    fleet[0].waiting = 9
    assert epp.pick(R(), fleet) == 1


@dataclass
class _Admitted(C):
    """A copy whose prefills have not begun but which vLLM has started within its budget."""

    starting: int = 0

    @property
    def queued(self) -> int:
        return self.starting

    @property
    def num_waiting(self) -> int:
        return 0


def test_epp_queue_scorer_reads_what_vllm_reports_as_waiting() -> None:
    # copy 0 has requests admitted behind a prefill that vLLM's next step starts: its
    # num_requests_waiting is 0, so the copy holding the prompt keeps the request (read as
    # 3 waiting, its queue score of 0 and its fuller pool would send it to copy 1)
    fleet = [_Admitted(held=5, starting=3, kv_usage=0.1), _Admitted(held=0)]
    epp = Epp(random.Random(0), prefix_weight=1.0, queue_weight=1.0, kv_weight=1.0,
              approximate=None)
    assert epp.pick(R(), fleet) == 0
