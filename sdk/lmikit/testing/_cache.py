"""The fake's KV cache: where a request lands, which chunks each model copy holds, and the
metrics the container and SageMaker publish about it.

Enabled when the fake can read model artifacts (``artifact_reader``). Per base component it
builds the fleet the deployment describes and reuses the simulator's models rather than a
second copy of them:

- copies: the component's ``RuntimeConfig.CopyCount``; a change of the component (a
  redeploy: new containers) starts with empty caches;
- chunk size and tier sizes: read back from the model artifact, as the container reads them
  (``lmcache_config.yaml``: ``chunk_size``, ``max_local_cpu_size`` and
  ``max_local_disk_size`` in GiB per worker, LMCache 0.5.6 ``local_cpu_backend.py`` /
  ``local_disk_backend.py`` multiply by ``1024**3``; ``remote_url``). No LMCache config
  (``kv_cache.mode: off``) means no LMCache tier. Tokens per GiB and the GPU KV pool come from
  the planner (:func:`lmikit.planner.plan`) for the model (``LMIKIT_MODEL_ID``), instance type
  and tensor parallel degree the deployment names;
- chunk keys: LMCache's chained prefix keys (:func:`lmikit.sim.token_chunk_keys`) over
  the echo model's tokens (whitespace words of every message); tiers are
  :class:`lmikit.sim.LruTier` (GPU prefix cache, CPU, disk per copy; one remote store);
  a lookup goes GPU, then CPU, disk, remote, continuing where the previous tier stopped, and
  every full chunk of the prompt is then stored in every tier (LMCache's storage manager);
- routing: the variant's ``RoutingConfig`` through :func:`lmikit.sim.make_router`; a
  request with a live ``SessionId`` goes to the copy the runtime says (a copy on the
  session's instance: ``_runtime``);
- timing: TTFT and retrieve times from the simulator's engine model
  (:func:`lmikit.sim.engine_for`) for the missing tokens and the tiers read.

Only one request is modelled at a time (no queueing: ``outstanding`` is always 0).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from lmikit.render import parse_properties
from lmikit.sim import (
    LMCACHE_TIERS,
    LruTier,
    Router,
    UnboundedTier,
    make_router,
    stable_id,
    token_chunk_keys,
)
from lmikit.spec import DEFAULT_PREFIX_LENGTH

GIB = 1024**3
ROUTING = {"RANDOM": "random", "LEAST_OUTSTANDING_REQUESTS": "least_outstanding",
           "PREFIX_AWARE": "prefix_aware", "KV_AWARE": "kv_aware"}
DEFAULT_GPU_TOKENS = 65_536  # when the planner does not know the model
DEFAULT_KV_BYTES_PER_TOKEN = 131_072


@dataclass(frozen=True)
class CacheSetup:
    """What one base component's copies look like (tokens per copy)."""

    chunk: int
    copies: int
    gpu_tokens: int
    cpu_tokens: int
    disk_tokens: int
    remote: bool
    routing: str
    prefix_length_bytes: int
    concurrency_threshold: int
    kv_bytes_per_token: int
    tp: int = 1  # tensor-parallel ranks per copy: each runs its own LMCache engine
    engine: Any = field(default=None, compare=False, repr=False)

    @property
    def lmcache(self) -> bool:
        return self.cpu_tokens > 0 or self.disk_tokens > 0 or self.remote


class _Copy:
    """One model copy: the sim router's view of it and its tiers."""

    def __init__(self, setup: CacheSetup, remote: LruTier | None) -> None:
        per = setup.chunk
        self.outstanding = 0
        self.gpu = LruTier(setup.gpu_tokens // per)
        self.tiers: dict[str, LruTier] = {}
        if setup.cpu_tokens:
            self.tiers["cpu"] = LruTier(setup.cpu_tokens // per)
        if setup.disk_tokens:
            self.tiers["disk"] = LruTier(setup.disk_tokens // per)
        if remote is not None:
            self.tiers["remote"] = remote

    @property
    def queued(self) -> int:
        return 0

    @property
    def num_waiting(self) -> int:
        return 0

    @property
    def kv_usage(self) -> float:
        return len(self.gpu) / self.gpu.capacity if self.gpu.capacity else 0.0

    def holds(self, keys: Sequence[int]) -> int:
        return self.gpu.match(keys)


@dataclass(frozen=True)
class _Routed:
    keys: tuple[int, ...]
    session: int
    prefix_id: int | None


@dataclass(frozen=True)
class Served:
    """Where one request's prompt came from."""

    copy: int
    prompt_tokens: int
    gpu_hit: int
    lmcache_hit: int  # from the start of the prompt, all LMCache tiers (LMCache's own count)
    external_hit: int  # tokens LMCache supplied beyond the GPU hit (vLLM's count)
    tiers: dict[str, int]  # tokens each LMCache tier supplied beyond the GPU hit
    ttft_s: float
    retrieve_s: float
    cpu_evictions: int
    lmcache: bool


class Fleet:
    """The copies of one base component and the router in front of them."""

    def __init__(self, setup: CacheSetup, seed: int = 0) -> None:
        self.setup = setup
        remote = UnboundedTier() if setup.remote else None
        self.copies = [_Copy(setup, remote) for _ in range(max(1, setup.copies))]
        self.rng = random.Random(seed)
        self.router: Router = make_router(
            setup.routing, self.rng, chunk_size=setup.chunk,
            prefix_length_bytes=setup.prefix_length_bytes,
            concurrency_threshold=setup.concurrency_threshold, busy_at=64)
        self.sessions: dict[str, int] = {}
        self.placements: list[tuple[str | None, int]] = []  # (session id, copy) per request

    def open_session(self, session_id: str) -> int:
        """A new session lands as the variant's strategy places a request, then sticks."""
        where = self.router.pick(_Routed((), stable_id(session_id), None), self.copies)
        self.sessions[session_id] = where
        return where

    def serve(self, words: list[str], *, session: str | None, prefix_id: str | None,
              salt: str = "", at_copy: int | None = None) -> Served:
        s = self.setup
        ids = [stable_id(w) for w in words]
        if salt:  # an adapter's KV is its own (LoRA changes every layer's keys)
            ids = [stable_id("lora:" + salt), *ids]
        keys = token_chunk_keys(ids, s.chunk)
        routed = _Routed(keys, stable_id(session) if session else -len(self.placements) - 1,
                         stable_id(prefix_id) if prefix_id else None)
        where = (at_copy if at_copy is not None
                 else self.sessions.get(session) if session else None)
        if where is None:
            where = self.router.pick(routed, self.copies)
        self.placements.append((session, where))
        copy = self.copies[where]
        n_prompt = len(ids)
        gpu_chunks = copy.gpu.match(keys)
        matched = gpu_chunks
        supplied: dict[str, int] = {}
        lmcache_from_start = 0
        if copy.tiers:
            # LMCache looks the whole prompt up from its start, tier after tier.
            at = 0
            for name in LMCACHE_TIERS:
                tier = copy.tiers.get(name)
                if tier is None:
                    continue
                got = tier.match(keys, at)
                tier.touch(keys[at:at + got])
                supplied[name] = max(0, (at + got) - max(at, gpu_chunks)) * s.chunk
                at += got
            lmcache_from_start = at
            matched = max(gpu_chunks, at)
        gpu_hit = gpu_chunks * s.chunk
        lmcache_hit = lmcache_from_start * s.chunk
        external = max(0, matched - gpu_chunks) * s.chunk
        copy.gpu.touch(keys[:gpu_chunks])
        copy.gpu.insert(keys)
        before = copy.tiers["cpu"].evictions if "cpu" in copy.tiers else 0
        for tier in copy.tiers.values():
            tier.insert(keys)
        evicted = (copy.tiers["cpu"].evictions - before) if "cpu" in copy.tiers else 0
        ttft, retrieve = self._times(n_prompt, matched * s.chunk, supplied)
        return Served(where, n_prompt, gpu_hit, lmcache_hit, external,
                      {k: v for k, v in supplied.items() if v}, ttft, retrieve, evicted,
                      bool(copy.tiers))

    def _times(self, prompt: int, cached: int, supplied: dict[str, int]) -> tuple[float, float]:
        engine = self.setup.engine
        if engine is None:
            return 0.0, 0.0
        retrieve = sum(engine.retrieve_s(tier, tokens) for tier, tokens in supplied.items()
                       if tokens)
        overhead = engine.coeff.request_overhead_s + prompt * engine.coeff.tokenize_s_per_token
        return engine.prefill_s(prompt - cached, cached) + retrieve + overhead, retrieve

    def usage_bytes(self, tier: str) -> int:
        """Bytes a tier holds, summed over copies (the remote store counted once)."""
        per = self.setup.chunk * self.setup.kv_bytes_per_token
        if tier == "remote":
            held = [c.tiers["remote"] for c in self.copies[:1] if "remote" in c.tiers]
            return sum(len(t) for t in held) * per
        return sum(len(c.tiers[tier]) for c in self.copies if tier in c.tiers) * per


def setup_for(env: dict[str, str], files: dict[str, bytes], *, instance_type: str,
              copies: int, routing: dict[str, Any]) -> CacheSetup:
    """The cache setup of a component from its environment, artifact files and variant."""
    props = parse_properties(files.get("serving.properties", b"").decode())
    model_id = (env.get("LMIKIT_MODEL_ID") or props.get("option.model_id")
                or env.get("HF_MODEL_ID") or "")
    tp = int(props.get("option.tensor_parallel_degree")
             or env.get("OPTION_TENSOR_PARALLEL_DEGREE") or 1)
    name = env.get("OPTION_LMCACHE_CONFIG_FILE", "lmcache_config.yaml")
    raw = files.get(name)
    lm = yaml.safe_load(raw) if raw else None
    lm = lm if isinstance(lm, dict) else {}
    chunk = int(lm.get("chunk_size", 256))
    gpu_tokens, kv_bytes, engine = DEFAULT_GPU_TOKENS, DEFAULT_KV_BYTES_PER_TOKEN, None
    try:
        from lmikit.planner import plan
        from lmikit.sim import engine_for

        p = plan(model_id, instance_type, tp=tp, copies=1, mode="off", chunk_size=chunk,
                 gpu_memory_utilization=float(props.get("option.gpu_memory_utilization",
                                                        0.9)))
        gpu_tokens, kv_bytes = p.gpu_kv_capacity_tokens, p.kv_bytes_per_token
        engine = engine_for(model_id, instance_type, tp, weight_bytes=p.weight_bytes)
    except Exception:  # noqa: BLE001 - an unknown model still serves, with default sizes
        pass
    per_worker = max(1, kv_bytes // max(1, tp))  # each worker holds 1/tp of a token's KV

    def tokens(size_gib: Any) -> int:
        return int(float(size_gib or 0) * GIB) // per_worker if size_gib else 0

    strategy = ROUTING.get(routing.get("RoutingStrategy", ""), "least_outstanding")
    prefix = routing.get("PrefixAwareRoutingConfig") or {}
    return CacheSetup(
        chunk=chunk, copies=copies, gpu_tokens=gpu_tokens,
        cpu_tokens=tokens(lm.get("max_local_cpu_size")) if lm.get("local_cpu", bool(lm))
        else 0,
        disk_tokens=tokens(lm.get("max_local_disk_size")) if lm.get("local_disk") else 0,
        remote=bool(lm.get("remote_url")), routing=strategy,
        prefix_length_bytes=int(prefix.get("PrefixLength", DEFAULT_PREFIX_LENGTH)),
        concurrency_threshold=int(prefix.get("ConcurrencyThreshold", 64)),
        kv_bytes_per_token=kv_bytes, tp=max(1, tp), engine=engine)


def container_datums(served: Served, output_tokens: int, fleet: Fleet
                     ) -> list[tuple[str, float, str]]:
    """(name, value, unit) of what the container's EMF line says about this one request
    (``lmikit/emf_metrics.json``: counters are this request's increase, quantiles its own
    value, ratios of this line's counters)."""
    p = served.prompt_tokens
    asked = p - served.gpu_hit if served.lmcache else 0
    out: list[tuple[str, float, str]] = [
        ("GpuPrefixCacheQueryTokens", p, "Count"),
        ("GpuPrefixCacheHitTokens", served.gpu_hit, "Count"),
        # vLLM's scheduler asks the KV connector for every token beyond the GPU hit (none
        # without a connector), hits and misses alike.
        ("ExternalPrefixCacheQueryTokens", asked, "Count"),
        ("ExternalPrefixCacheHitTokens", served.external_hit, "Count"),
        ("PromptTokens", p, "Count"),
        ("GenerationTokens", output_tokens, "Count"),
        ("TimeToFirstTokenCount", 1, "Count"),
        ("TimeToFirstTokenP50", served.ttft_s, "Seconds"),
        ("TimeToFirstTokenP90", served.ttft_s, "Seconds"),
        ("TimeToFirstTokenP99", served.ttft_s, "Seconds"),
        ("GpuKvCacheUsage", fleet.copies[served.copy].kv_usage, "None"),
        ("RequestsRunning", 0, "Count"),
        ("RequestsWaiting", 0, "Count"),
    ]
    if p:
        out.append(("GpuPrefixCacheHitRate", served.gpu_hit / p, "None"))
        out.append(("PrefixCacheHitRate", (served.gpu_hit + served.external_hit) / p, "None"))
    if served.lmcache:
        # every tensor-parallel rank's LMCache engine counts the tokens it retrieved
        out += [("LMCacheHitTokens", served.lmcache_hit * fleet.setup.tp, "Count"),
                ("LMCacheRemoteReadBytes", served.tiers.get("remote", 0)
                 * fleet.setup.kv_bytes_per_token, "Bytes"),
                ("LMCacheCpuEvictions", served.cpu_evictions, "Count")]
        # no remote usage: LMCache 0.5.6 never updates lmcache:remote_cache_usage
        for tier, metric in (("cpu", "LMCacheCpuUsageBytes"), ("disk", "LMCacheDiskUsageBytes")):
            if any(tier in c.tiers for c in fleet.copies):
                out.append((metric, fleet.usage_bytes(tier), "Bytes"))
        if asked:
            out.append(("ExternalPrefixCacheHitRate", served.external_hit / asked, "None"))
        if served.retrieve_s > 0:
            retrieved = sum(served.tiers.values())
            out.append(("LMCacheRetrieveSpeedMean", retrieved / served.retrieve_s,
                        "Count/Second"))
            out.append(("LMCacheRetrieveTimeP90", served.retrieve_s, "Seconds"))
    return out


MetricsSink = Callable[[str, list[dict[str, Any]]], None]


def cloudwatch_sink(cloudwatch: Any) -> MetricsSink:
    """A sink that sends datums with ``PutMetricData`` (at most 1000 per call)."""
    def put(namespace: str, datums: list[dict[str, Any]]) -> None:
        for start in range(0, len(datums), 1000):
            cloudwatch.put_metric_data(Namespace=namespace, MetricData=datums[start:start + 1000])
    return put


def emf_settings(env: dict[str, str]) -> dict[str, Any] | None:
    """``LMIKIT_EMF`` (the container emits only when it is set), or None."""
    raw = env.get("LMIKIT_EMF")
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("dimensions"), dict) else None
