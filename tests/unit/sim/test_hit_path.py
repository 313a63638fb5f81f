"""The cost of an LMCache hit and of a miss, rule by rule, each against the source it is read
from: vLLM's KV-connector hooks and LMCache 0.5.6's connector, engine and stores.

Where LMCache's own source is installed (the dev set-up installs lmcache 0.5.6 without its
dependencies), the facts the simulator's tables state are read back from it.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import engine_for
from lmikit.sim._loop import CopyConfig, run
from lmikit.sim._routers import LeastOutstanding
from lmikit.sim._stores import ALL, STORES, store_for_url
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from lmikit.spec import REMOTE_URL_PATTERN

P4DE = "ml.p4de.24xlarge"
COEFF = Coefficients(request_overhead_s=0.01)


def trace(*reqs: tuple[float, list[tuple[int, int]], int]) -> Workload:
    requests = [Request(i, chunk_keys(segs, 256), sum(n for _, n in segs), out, session=i,
                        arrival_s=t) for i, (t, segs, out) in enumerate(reqs)]
    return Workload("t", [Phase("t", [[r] for r in requests], open_loop=True)], 256)


def copy(coeff: Coefficients = COEFF, remote_store: str = "redis", **kw: int) -> CopyConfig:
    engine = engine_for("Qwen/Qwen3-8B", P4DE, coeff=coeff, remote_store=remote_store)
    base = {"gpu_tokens": 1_000_000, "chunk_size": 256, "max_batch_size": 64}
    return CopyConfig(engine, **{**base, **kw})  # type: ignore[arg-type]


def slower(**efficiencies: float) -> Coefficients:
    return COEFF.replace(**efficiencies)


# -- the load of a hit: synchronous, inside the step ------------------------------------------

def test_a_hit_delays_every_running_decode_by_its_whole_load() -> None:
    """vLLM runs the connector's ``start_load_kv`` before the forward of every step
    (``KVConnectorModelRunnerMixin._get_kv_connector_output``) and LMCache's
    ``LMCacheConnectorV1.get_num_new_matched_tokens`` answers ``load_kv_async=False``: the
    step that schedules a hit, and every request decoding in it, waits for the whole
    load. So a decode running beside a CPU hit ends later by exactly what the load takes
    longer."""
    work = trace((0.0, [(1, 500)], 400),  # decodes through the hit below
                 (0.5, [(2, 10_240), (3, 100)], 1))
    hit = Request(1, work.requests[1].keys, 10_340, 1, session=1, arrival_s=0.5,
                  forced=(("cpu", 10_240),))  # served from the CPU tier, as a replay says
    work = Workload("t", [Phase("t", [[work.requests[0]], [hit]], open_loop=True)], 256)
    ends, loads = [], []
    for eff in (0.7, 0.07):
        cfg = copy(slower(cpu_retrieve_efficiency=eff), cpu_tokens=100_000)
        out = run(work, [cfg], LeastOutstanding())
        assert out.ttft[1] < out.end[0]
        ends.append(out.end[0])
        loads.append(cfg.engine.retrieve_s("cpu", 10_240))
    assert ends[1] - ends[0] == pytest.approx(loads[1] - loads[0], rel=1e-6)


def test_hits_scheduled_together_load_one_after_the_other() -> None:
    """LMCache's ``start_load_kv`` loops over the step's requests and ``retrieve`` blocks
    on each (``load_stream.synchronize()`` in ``batched_to_gpu``): two hits that arrive
    together load serially, so the second one's first token waits for both loads."""
    a, b = (1, 5_120), (2, 5_120)
    work = trace((0.0, [a, (3, 50)], 1), (0.0, [b, (4, 50)], 1),
                 (5.0, [a, (5, 50)], 1), (5.0, [b, (6, 50)], 1))
    ttft, load = [], []
    for eff in (0.7, 0.07):
        cfg = copy(slower(cpu_retrieve_efficiency=eff), gpu_tokens=5_300, cpu_tokens=100_000)
        out = run(work, [cfg], LeastOutstanding())
        assert out.served["cpu"][2] + out.served["gpu"][2] == 5_120
        assert out.served["cpu"][3] + out.served["gpu"][3] == 5_120
        ttft.append(out.ttft[3] - out.arrival[3])
        load.append(cfg.engine.retrieve_s("cpu", out.served["cpu"][2])
                    + cfg.engine.retrieve_s("cpu", out.served["cpu"][3]))
    assert ttft[1] - ttft[0] == pytest.approx(load[1] - load[0], rel=1e-6)


def test_every_request_waits_for_the_lookup_before_its_step_hit_or_miss() -> None:
    """``LMCacheConnectorV1.get_num_new_matched_tokens`` calls ``lookup_client.lookup`` the
    first time vLLM's scheduler sees a request (LMCache 0.5.6 ``vllm_v1_adapter.py``): it
    hashes the prompt's full chunks and waits for every rank's lookup server. A miss on a
    copy with LMCache pays it; the same miss without LMCache does not."""
    work = trace((0.0, [(1, 2_560), (2, 100)], 1))
    with_lmcache = run(work, [copy(cpu_tokens=100_000)], LeastOutstanding())
    without = run(work, [copy()], LeastOutstanding())
    engine = copy().engine
    assert with_lmcache.ttft[0] - without.ttft[0] == pytest.approx(
        engine.lookup_s(10) + engine.store_s(2_560))
    assert engine.lookup_s(10) == pytest.approx(COEFF.lookup_rpc_s
                                                + 10 * COEFF.hash_s_per_chunk)


def test_a_lookup_asks_the_remote_store_chunk_by_chunk_until_the_first_miss() -> None:
    """Redis (``redis://``) has no batched existence check in LMCache 0.5.6
    (``RedisConnector`` lacks ``support_batched_contains``), so ``RemoteBackend.
    batched_contains`` loops over ``contains``: one EXISTS round trip per chunk, one after
    another, until the first miss. A prompt whose 10 chunks all miss asks once; one whose
    first 10 chunks another copy stored asks 11 times (10 hits and the miss after them)."""
    doc = (1, 2_560)
    work = trace((0.0, [doc, (2, 300)], 1), (5.0, [doc, (3, 300)], 1))
    ttft = []
    for rtt in (0.0, 0.01):
        cfg = copy(COEFF.replace(remote_rtt_s=rtt), cpu_tokens=100_000, remote=True)
        out = run(work, [cfg, cfg], LeastOutstanding())  # the second lands on the idle copy
        assert out.copy_of[0] != out.copy_of[1] and out.served["remote"][1] == 2_560
        ttft.append([out.ttft[i] - out.arrival[i] for i in (0, 1)])
    # the miss asks about its first chunk; the hit about its 10 chunks and the 11th, then
    # reads them 4 at a time with 2 GETs each (3 waves)
    assert ttft[1][0] - ttft[0][0] == pytest.approx(1 * 0.01)
    assert ttft[1][1] - ttft[0][1] == pytest.approx((11 + 3 * 2) * 0.01)


def test_a_hit_split_between_cpu_and_remote_asks_the_remote_store_again_inside_the_step() -> None:
    """When the lookup pinned a hit in more than one tier, ``LMCacheEngine.
    _process_tokens_internal`` maps the chunks to tiers again (``StorageManager.
    get_block_mapping``), asking the remote store about each of its chunks a second time,
    now inside the step; a hit from one tier reuses the lookup's mapping."""
    e = copy(COEFF.replace(remote_rtt_s=0.01), cpu_tokens=100_000, remote=True).engine
    assert e.remote_contains_s(10) == pytest.approx(10 * 0.01)
    source = _lmcache_source("v1/cache_engine.py")
    if source is not None:
        assert "len(self.lookup_pins[kwargs[\"req_id\"]]) == 1" in source
        assert "self.storage_manager.get_block_mapping(chunk_infos)" in source


# -- the store of a miss: after every step, blocking it ---------------------------------------

def test_the_store_of_a_miss_delays_every_running_decode_and_the_first_token() -> None:
    """vLLM calls the connector's ``wait_for_save`` in the ``finally`` of every step
    (``_get_kv_connector_output``), and LMCache's ``wait_for_save`` stores the step's new
    full chunks with a ``store_stream.synchronize()`` per chunk (``VLLMPagedMemGPUConnector
    V2.from_gpu``): the prefill's first token and every running decode wait for it."""
    work = trace((0.0, [(1, 500)], 300), (0.5, [(2, 10_240)], 1))
    ends, firsts, stores = [], [], []
    for eff in (0.7, 0.07):
        cfg = copy(slower(cpu_store_efficiency=eff), cpu_tokens=100_000)
        out = run(work, [cfg], LeastOutstanding())
        ends.append(out.end[0])
        firsts.append(out.ttft[1])
        stores.append(cfg.engine.store_s(10_240))
        stores.append(cfg.engine.store_s(256))  # the first prompt's one full chunk
    assert firsts[1] - firsts[0] == pytest.approx(stores[2] - stores[0], rel=1e-6)
    # (to 1e-4: the later first token shifts the decode, whose steps read a little less KV)
    assert ends[1] - ends[0] == pytest.approx(
        stores[2] - stores[0] + stores[3] - stores[1], rel=1e-4)


def test_a_hit_stores_only_the_full_chunks_past_what_lmcache_holds() -> None:
    """``ReqMeta.from_request_tracker`` starts saving at ``num_saved_tokens``, which
    ``RequestTracker`` sets to LMCache's hit, and keeps only full chunks
    (``save_unfull_chunk`` False): a 2,560-token CPU hit with a 600-token suffix stores 2
    new chunks, not the 88 tokens after them."""
    doc = (1, 2_560)
    work = trace((0.0, [doc, (2, 10)], 1), (5.0, [doc, (3, 600)], 1))
    fast = run(work, [copy(gpu_tokens=2_600, cpu_tokens=100_000)], LeastOutstanding())
    cfg = copy(slower(cpu_store_efficiency=0.07), gpu_tokens=2_600, cpu_tokens=100_000)
    slow = run(work, [cfg], LeastOutstanding())
    base = copy().engine
    assert (slow.ttft[1] - fast.ttft[1]) == pytest.approx(
        cfg.engine.store_s(512) - base.store_s(512), rel=1e-6)


def test_a_prefill_preempted_part_way_leaves_only_what_it_computed_in_lmcache() -> None:
    """LMCache stores a prefill's full chunks after each step that completes them
    (``wait_for_save``), so a prefill preempted part-way has stored only those: readmitted,
    it finds them (in the GPU prefix cache, or in the CPU tier where the growing decode
    evicted them from the GPU) and computes the rest, not the whole prompt as a hit. The
    10,000-token prompt stalls for room beside a decode, is preempted, and comes back."""
    work = trace((0.0, [(1, 4_000)], 3_000), (0.2, [(2, 10_000)], 1))
    # a 2,048-token step budget, admitting as vLLM before 0.19 did (the next chunk fits)
    budget = COEFF.replace(prefill_chunk_tokens=2_048)
    on = run(work, [copy(budget, gpu_tokens=12_000, cpu_tokens=100_000,
                         reserve_full_prompt=False)], LeastOutstanding())
    off = run(work, [copy(budget, gpu_tokens=12_000, reserve_full_prompt=False)],
              LeastOutstanding())
    assert on.served["gpu"][1] == off.served["gpu"][1] > 0  # computed, still on the GPU
    assert on.served["cpu"][1] > 0  # computed, evicted from the GPU, kept by LMCache
    assert on.served["gpu"][1] + on.served["cpu"][1] < 39 * 256  # not the chunks to come


# -- the remote stores and what LMCache's source says about them ------------------------------

def test_every_remote_url_scheme_the_spec_takes_names_a_store() -> None:
    schemes = re.search(r"\^\(([a-z0-9|]+)\)", REMOTE_URL_PATTERN)
    assert schemes
    for scheme in schemes.group(1).split("|"):
        assert scheme in store_for_url(f"{scheme}://host:1").schemes
    assert store_for_url(None).kind == "redis"
    assert store_for_url("sagemaker-hyperpod://10.0.0.1:9200").kind == "hyperpod"
    with pytest.raises(ValueError, match="no remote store is known for gopher://"):
        store_for_url("gopher://x")


def test_a_remote_read_runs_as_many_chunks_at_once_as_its_connector_allows() -> None:
    """40 chunks: Redis reads 4 at a time, 2 GETs each (10 waves of 2 round trips);
    HyperPod every one at once (up to 100), a lease and its release each (2 round trips);
    the LMCache server one at a time on one socket (40 round trips)."""
    n = 40 * 256
    for kind, trips in (("redis", 10 * 2), ("hyperpod", 1 * 2), ("lm", 40 * 1),
                        ("mooncake", 1)):
        coeff = COEFF.replace(remote_rtt_s=0.01, remote_gbps=2.0)
        e = engine_for("Qwen/Qwen3-8B", P4DE, coeff=coeff, remote_store=kind)
        assert e.retrieve_s("remote", n) - e.retrieve_s("cpu", n) == pytest.approx(
            trips * 0.01 + n * e.kv_bytes_per_token / 2e9), kind
        looked = STORES[kind].lookup_trips
        assert e.remote_contains_s(40) == pytest.approx(40 * looked * 0.01), kind


def test_a_store_kind_brings_its_own_round_trip_and_read_rate() -> None:
    """Without coefficients, a deployment's engine reads its remote store at that store's
    figures; where the store's rate is the network's, at the instance's network."""
    s3 = engine_for("Qwen/Qwen3-8B", P4DE, remote_store="s3")
    assert s3.coeff.remote_rtt_s == STORES["s3"].rtt_s
    assert s3.coeff.remote_gbps == s3.network_gbps == 50.0  # p4de: 400 Gbit/s
    redis = engine_for("Qwen/Qwen3-8B", P4DE)
    assert (redis.coeff.remote_rtt_s, redis.coeff.remote_gbps) == (0.0002, 2.0)
    with pytest.raises(ValueError, match="unknown remote store 'tape'"):
        engine_for("Qwen/Qwen3-8B", P4DE, remote_store="tape")


def _lmcache_root() -> Path | None:
    spec = importlib.util.find_spec("lmcache")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _lmcache_source(relative: str) -> str | None:
    root = _lmcache_root()
    return (root / relative).read_text() if root is not None else None


def _class(relative: str, name: str) -> ast.ClassDef:
    source = _lmcache_source(relative)
    if source is None:
        pytest.skip("lmcache is not installed (bash .ci/setup installs it)")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"{name} not in lmcache/{relative}")


def _methods(cls: ast.ClassDef) -> dict[str, ast.AST]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _calls(node: ast.AST, attribute: str) -> int:
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr == attribute)


def test_the_store_table_reads_as_lmcache_0_5_6s_connectors() -> None:
    """Each row of ``lmikit.sim._stores`` against LMCache 0.5.6's source (installed)."""
    connectors = "v1/storage_backend/connector/"
    redis = _methods(_class(connectors + "redis_connector.py", "RedisConnector"))
    assert "support_batched_contains" not in redis  # a lookup asks chunk by chunk
    assert _calls(redis["_exists"], "exists") == 1 and _calls(redis["_get"], "get") == 2
    pq = _methods(_class("v1/storage_backend/job_executor/pq_executor.py", "AsyncPQExecutor"))
    init = pq["__init__"]
    assert isinstance(init, ast.FunctionDef)
    assert ast.literal_eval(init.args.defaults[-1]) == STORES["redis"].parallel_gets == 4

    hp = _methods(_class(connectors + "sagemaker_hyperpod_connector.py",
                         "SageMakerHyperPodConnector"))
    assert "support_batched_contains" not in hp
    for name in ("exists", "get"):  # a lease, then its release: two requests per chunk
        assert _calls(hp[name], "_executor_submit_lease_acquisition") == 1
        assert _calls(hp[name], "_release_lease") == 1
    assert STORES["hyperpod"].lookup_trips == STORES["hyperpod"].get_trips == 2
    adapter = _lmcache_source(connectors + "sagemaker_hyperpod_adapter.py") or ""
    assert f'"max_concurrent_requests": {STORES["hyperpod"].parallel_gets},' in adapter
    assert (f'extra_config.get("s3_num_io_threads", {STORES["s3"].parallel_gets})'
            in (_lmcache_source(connectors + "s3_adapter.py") or ""))
    mooncake = _methods(_class(connectors + "mooncakestore_connector.py",
                               "MooncakestoreConnector"))
    # one batch_get_into call for every chunk, in one thread
    assert _calls(mooncake["_batch_get_into"], "to_thread") == 1
    assert STORES["mooncake"].parallel_gets == ALL
    base = _methods(_class("v1/storage_backend/abstract_backend.py",
                           "StorageBackendInterface"))
    # the fallback every store without a batched check takes: contains() per key, stopping
    # at the first miss
    loop = base["batched_contains"]
    assert _calls(loop, "contains") == 1 and any(isinstance(n, ast.Break)
                                                   for n in ast.walk(loop))


def test_lmcache_defaults_the_hit_path_is_built_on() -> None:
    """The configuration defaults these rules assume (LMCache 0.5.6 ``v1/config.py``):
    256-token chunks, no partial chunks, whole-request (not layer-wise) synchronous loads,
    prompts only stored, Python's hash; and its own vLLM connector answering
    ``load_kv_async=False``; the disk tier's four read threads."""
    pytest.importorskip("lmcache.v1.config")
    from lmcache.v1.config import _CONFIG_DEFINITIONS  # type: ignore[import-untyped]

    defaults = {k: v["default"] for k, v in _CONFIG_DEFINITIONS.items()}
    assert defaults["chunk_size"] == 256
    assert defaults["save_unfull_chunk"] is False
    assert defaults["use_layerwise"] is False
    assert defaults["enable_async_loading"] is False
    assert defaults["save_decode_cache"] is False
    assert defaults["pre_caching_hash_algorithm"] == "builtin"
    connector = _lmcache_source("integration/vllm/lmcache_connector_v1.py") or ""
    assert re.search(r"get_num_new_matched_tokens\(\s*request, num_computed_tokens\s*\), False",
                     connector)
    disk = _lmcache_source("v1/storage_backend/local_disk_backend.py") or ""
    assert "_DEFAULT_THREAD_COUNT = 4" in disk
    assert "local_cpu_backend.batched_submit_put_task(keys, memory_objs_no_none)" in (
        _lmcache_source("v1/storage_backend/storage_manager.py") or "")


# the store table and the miss-path check live in the model reference
PLANNER_DOC = Path(__file__).resolve().parents[3] / "docs" / "planner-model.md"


def test_the_store_table_in_the_model_reference_is_lmikit_sim_stores() -> None:
    from lmikit.sim._stores import NETWORK

    lines = PLANNER_DOC.read_text(encoding="utf-8").splitlines()
    for store in STORES.values():
        row = next(line for line in lines if line.startswith(f"| {store.kind} | "))
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[1] == ", ".join(store.schemes), store.kind
        assert cells[2].split()[0] == str(store.lookup_trips), store.kind
        assert cells[3].split()[0] == str(store.get_trips), store.kind
        assert cells[4].split()[0] == (str(store.parallel_gets) if store.parallel_gets
                                       else "all"), store.kind
        assert cells[5].startswith(f"{store.rtt_s * 1000:g} ms"), store.kind
        assert cells[6].startswith("the instance's network" if store.gbps == NETWORK
                                   else f"{store.gbps:g} GB/s"), store.kind


def test_the_miss_overhead_check_in_the_model_reference_is_what_the_simulator_gives() -> None:
    """The out-of-sample check of the miss path the docs quote (GPUStack published +4.0%,
    +15.0% and +5.5% mean TTFT with LMCache on misses): recomputed from the accuracy
    table's replay of that run (``gpustack.py``), so the text cannot drift from the model."""
    from tests.unit.sim import gpustack

    text = " ".join(PLANNER_DOC.read_text(encoding="utf-8").split())
    ratios = []
    for length in gpustack.PUBLISHED:
        (off_rate, off_ttft, _), (on_rate, on_ttft, _) = (gpustack.result(length, lmcache)
                                                            for lmcache in (False, True))
        ratios.append((on_ttft / off_ttft, on_rate / off_rate))
    ttft = ", ".join(f"{t - 1:+.1%}" for t, _ in ratios[:2]) + f" and {ratios[2][0] - 1:+.1%}"
    rate = ", ".join(f"{r - 1:+.1%}" for _, r in ratios[:2]) + f" and {ratios[2][1] - 1:+.1%}"
    assert f"the simulator gives {ttft} TTFT and {rate} output rate" in text
    assert all(1.0 < t < 1.04 for t, _ in ratios)  # below every published overhead
