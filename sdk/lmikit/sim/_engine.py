"""One model copy's costs: prefill, decode steps, LMCache retrieve and store per tier.

Its rules and their sources: docs/planner-model.md, "The engine's costs".

>>> m = engine_for("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
>>> m.prefill_s(10_000, 0) > m.prefill_s(100, 9_900) > 0
True
>>> m.retrieve_s("cpu", 10_000) < m.retrieve_s("disk", 10_000)
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from lmikit import sizing
from lmikit.sim._coefficients import Coefficients, hbm_gbps
from lmikit.sim._stores import STORES, RemoteStore

TIERS = ("gpu", "cpu", "disk", "remote")


@dataclass(frozen=True)
class EngineModel:
    """Costs for one model copy (``tp`` GPUs) of one model on one instance type."""

    active_params: int
    layers: int
    attention_dim: int
    tp: int
    tflops_per_gpu: float
    hbm_gbps: float
    weight_bytes: int
    kv_bytes_per_token: int  # per copy, every rank's share together (LMCache's stored size)
    host_to_gpu_gbps: float
    nvme_read_gbps: float
    coeff: Coefficients = field(default_factory=Coefficients)
    hidden_size: int = 0
    pcie_allreduce_gbps: float = 0.0  # >0: TP all-reduces cross PCIe at most this fast
    # bytes LMCache's tiers hold per token, when fewer than kv_bytes_per_token (MLA at TP > 1:
    # stored from the first rank only, ModelGeometry.lmcache_replication); 0: the same
    stored_kv_bytes_per_token: int = 0
    network_gbps: float = 0.0  # >0: the instance's network, GB/s; a remote read is no faster
    chunk_size: int = 256  # LMCache's chunk_size: what it hashes, looks up and reads by
    remote_store: str = "redis"  # the remote tier's kind (lmikit.sim.STORES)
    _flops_rate: float = field(init=False, repr=False, compare=False)
    _hbm_rate: float = field(init=False, repr=False, compare=False)
    _step_overhead_s: float = field(init=False, repr=False, compare=False)
    _pcie: bool = field(init=False, repr=False, compare=False)
    _store: RemoteStore = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the rates every cost divides by, computed once (the simulator asks for a cost at
        # nearly every event); each is the same expression the methods below once evaluated
        c = self.coeff
        object.__setattr__(self, "_flops_rate", self.tflops_per_gpu * 1e12 * self.tp
                           * c.prefill_mfu)
        object.__setattr__(self, "_hbm_rate", self.hbm_gbps * 1e9 * c.decode_hbm_efficiency)
        object.__setattr__(self, "_step_overhead_s", c.decode_step_overhead_s if self.tp == 1
                           else c.tp_decode_step_overhead_s)
        object.__setattr__(self, "_pcie", self.tp > 1 and self.pcie_allreduce_gbps > 0)
        if self.remote_store not in STORES:
            raise ValueError(f"unknown remote store {self.remote_store!r}; valid: "
                             + ", ".join(STORES))
        object.__setattr__(self, "_store", STORES[self.remote_store])

    @property
    def allreduces_cross_pcie(self) -> bool:
        """Tensor parallel on GPUs without NVLink: its all-reduces are costed over PCIe."""
        return self._pcie

    def allreduce_s(self, tokens: int) -> float:
        """Seconds a step of ``tokens`` waits for its all-reduces over PCIe (0 on one GPU or
        over NVLink): 2 per layer of ``tokens x hidden_size`` bf16 values, each GPU sending
        2 (TP - 1) / TP of them through its link."""
        if not self._pcie or tokens <= 0:
            return 0.0
        per_gpu = 2 * self.layers * tokens * self.hidden_size * 2 * 2 * (self.tp - 1) / self.tp
        return per_gpu / (self.pcie_allreduce_gbps * 1e9)

    def prefill_s(self, new_tokens: int, context_tokens: int) -> float:
        """Seconds of GPU time to prefill ``new_tokens`` after ``context_tokens`` cached:
        its FLOPs, or its steps' passes over weights and KV if those take longer."""
        if new_tokens <= 0:
            return 0.0
        steps = -(-new_tokens // self.coeff.prefill_chunk_tokens)
        return (max(self._prefill_compute_s(new_tokens, context_tokens),
                    steps * self._step_memory_s(context_tokens))
                + self.allreduce_s(new_tokens))

    def _prefill_compute_s(self, new_tokens: int, context_tokens: int) -> float:
        flops = sizing.prefill_flops(self.active_params, self.layers, self.attention_dim,
                                     new_tokens, context_tokens)
        return flops / self._flops_rate

    def _step_memory_s(self, context_tokens: int) -> float:
        """One pass over the weights and ``context_tokens`` of KV, per GPU in parallel."""
        per_gpu = (self.weight_bytes + context_tokens * self.kv_bytes_per_token) / self.tp
        return per_gpu / self._hbm_rate

    def _decode_compute_s(self, batch: int) -> float:
        return 2.0 * self.active_params * batch / self._flops_rate

    @property
    def step_overhead_s(self) -> float:
        """Fixed cost of one engine step: one GPU's, or a tensor-parallel engine's, whose
        steps also wait for all-reduces."""
        return self._step_overhead_s

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        """One decode step for ``batch`` sequences holding ``context_tokens`` of KV in all."""
        if batch <= 0:
            return 0.0
        return (max(self._step_memory_s(context_tokens), self._decode_compute_s(batch))
                + self._step_overhead_s + self.allreduce_s(batch))

    def mixed_prefill_s(self, new_tokens: int, context_tokens: int, batch: int,
                        batch_context_tokens: int) -> tuple[float, int]:
        """A prefill run in vLLM's mixed steps beside ``batch`` decoding sequences.

        Each step spends the token budget (``prefill_chunk_tokens``) on one token per
        decoding sequence and the rest on the prompt, so the prompt takes ``steps`` steps;
        every step reads the weights and the batch's KV once and computes both parts:
        time = max(prefill FLOPs + steps x decode FLOPs, steps x one pass over weights and
        KV) + steps x the per-step overhead. Returns (seconds, steps); with no batch it
        is :meth:`prefill_s` alone.
        """
        if batch <= 0:
            return self.prefill_s(new_tokens, context_tokens), 0
        room = self.step_budget(batch)
        steps = max(1, -(-new_tokens // room))
        compute = (self._prefill_compute_s(new_tokens, context_tokens)
                   + steps * self._decode_compute_s(batch))
        memory = steps * self._step_memory_s(batch_context_tokens)
        return (max(compute, memory) + steps * self._step_overhead_s
                + self.allreduce_s(new_tokens + steps * batch), steps)

    def step_budget(self, batch: int) -> int:
        """Prompt tokens one step computes beside ``batch`` decoding sequences."""
        left = self.coeff.prefill_chunk_tokens - (batch if batch > 0 else 0)
        return left if left > 1 else 1  # max() costs more: this runs at nearly every event

    def packed_prefill_s(self, new_tokens: int, context_tokens: int) -> float:
        """Seconds ``new_tokens`` of a prompt add to a step another prefill pays for: their
        FLOPs (and all-reduces over PCIe); the step's reads and overhead are paid."""
        if new_tokens <= 0:
            return 0.0
        return self._prefill_compute_s(new_tokens, context_tokens) + self.allreduce_s(new_tokens)

    def _to_gpu_s(self, tokens: int, efficiency: float) -> float:
        per_gpu = tokens * self.kv_bytes_per_token / self.tp
        return sizing.transfer_seconds(per_gpu, self.host_to_gpu_gbps * efficiency)

    def chunks(self, tokens: int) -> int:
        """LMCache chunks that ``tokens`` of a hit or a store span."""
        return -(-tokens // self.chunk_size) if tokens > 0 else 0

    def lookup_s(self, chunks: int, remote_checked: int = 0) -> float:
        """Seconds LMCache's lookup of a new request holds vLLM's scheduler, before the
        step it is scheduled in: hashing its ``chunks`` full chunks, one request to every
        rank's lookup server, and ``remote_checked`` chunks asked of the remote store one
        after another (the store's round trips per chunk)."""
        return (self.coeff.lookup_rpc_s + chunks * self.coeff.hash_s_per_chunk
                + self.remote_contains_s(remote_checked))

    def remote_contains_s(self, chunks: int) -> float:
        """Seconds to ask the remote store whether ``chunks`` chunks exist, one by one."""
        return chunks * self._store.lookup_trips * self.coeff.remote_rtt_s

    def retrieve_s(self, tier: str, tokens: int) -> float:
        """Seconds to bring ``tokens`` of cached KV from ``tier`` into the GPUs: hashing
        its chunks again in the worker, reading them from the tier into CPU memory, then
        the copy to the GPUs (each rank its share, in parallel)."""
        if tokens <= 0 or tier == "gpu":
            return 0.0
        chunks = self.chunks(tokens)
        copy = (self._to_gpu_s(tokens, self.coeff.cpu_retrieve_efficiency)
                + chunks * self.coeff.hash_s_per_chunk)
        total_bytes = tokens * (self.stored_kv_bytes_per_token or self.kv_bytes_per_token)
        if tier == "cpu":
            return copy
        if tier == "disk":
            return copy + sizing.transfer_seconds(
                total_bytes, self.nvme_read_gbps * self.coeff.disk_read_efficiency)
        if tier == "remote":
            store = self._store
            waves = 1 if store.parallel_gets <= 0 else -(-chunks // store.parallel_gets)
            return (copy + waves * store.get_trips * self.coeff.remote_rtt_s
                    + sizing.transfer_seconds(total_bytes, self.remote_read_gbps))
        raise ValueError(f"unknown tier {tier!r}; valid: {', '.join(TIERS)}")

    @property
    def remote_read_gbps(self) -> float:
        """The remote tier's read rate: ``remote_gbps``, at most the instance's network."""
        return remote_read_gbps(self.coeff.remote_gbps, self.network_gbps)

    def store_s(self, tokens: int) -> float:
        """Seconds the step waits while LMCache hashes ``tokens`` of new KV and copies them
        to CPU memory, a chunk at a time."""
        if tokens <= 0:
            return 0.0
        return (self._to_gpu_s(tokens, self.coeff.cpu_store_efficiency)
                + self.chunks(tokens) * self.coeff.hash_s_per_chunk)

    def with_coefficients(self, coeff: Coefficients) -> EngineModel:
        return dataclasses.replace(self, coeff=coeff)


def remote_read_gbps(remote_gbps: float, network_gbps: float) -> float:
    """A remote tier read at ``remote_gbps``, no faster than the instance's network
    (``network_gbps``, GB/s; 0: unknown, no cap)."""
    return network_gbps if 0 < network_gbps < remote_gbps else remote_gbps


def engine_for(model_id: str, instance_type: str, tp: int = 1, *,
               kv_dtype_bytes: int = 2, weight_bytes: int | None = None,
               config_path: str | None = None,
               coeff: Coefficients | None = None, chunk_size: int = 256,
               remote_store: str = "redis") -> EngineModel:
    """The engine model of ``model_id`` on ``instance_type`` from lmikit's catalogs.

    Without ``coeff``, the defaults with the remote store's own round trip and read rate
    (:data:`lmikit.sim.STORES`; the instance's network where the store's rate is
    the network's)."""
    from lmikit.catalog import get_instance, get_model

    inst = get_instance(instance_type)
    if coeff is None:
        coeff = store_coefficients(remote_store, inst.network_gbit / 8)
    geo = get_model(model_id, config_path) if config_path else get_model(model_id)
    return EngineModel(
        active_params=geo.active_params, layers=geo.num_layers,
        attention_dim=geo.attention_dim, tp=tp, tflops_per_gpu=inst.gpu.bf16_dense_tflops,
        hbm_gbps=hbm_gbps(inst.gpu.name),
        weight_bytes=weight_bytes if weight_bytes is not None else geo.weight_bytes,
        kv_bytes_per_token=geo.kv_bytes_per_token(kv_dtype_bytes) * geo.kv_replication(tp),
        host_to_gpu_gbps=inst.host_to_gpu_gbps, nvme_read_gbps=inst.nvme_read_gbps,
        coeff=coeff, hidden_size=geo.hidden_size,
        pcie_allreduce_gbps=0.0 if inst.nvlink else inst.host_to_gpu_gbps,
        stored_kv_bytes_per_token=(geo.kv_bytes_per_token(kv_dtype_bytes)
                                   * geo.lmcache_replication(tp)),
        network_gbps=inst.network_gbit / 8, chunk_size=chunk_size, remote_store=remote_store,
    )


def store_coefficients(remote_store: str, network_gbps: float,
                       base: Coefficients | None = None) -> Coefficients:
    """``base`` (the defaults) with the round trip and read rate of ``remote_store``."""
    from lmikit.sim._stores import NETWORK

    if remote_store not in STORES:
        raise ValueError(f"unknown remote store {remote_store!r}; valid: {', '.join(STORES)}")
    store = STORES[remote_store]
    gbps = store.gbps if store.gbps != NETWORK or network_gbps <= 0 else network_gbps
    if gbps == NETWORK:  # the network's rate on an instance whose network is unknown
        gbps = (base or Coefficients()).remote_gbps
    return (base or Coefficients()).replace(remote_rtt_s=store.rtt_s, remote_gbps=gbps)


@dataclass(frozen=True)
class SingleRequest:
    """TTFT of one request alone on an idle copy: a miss, and a hit from each tier."""

    miss_s: float
    hit_s: dict[str, float]
    matched_tokens: int
    remainder_tokens: int


def single_request(m: EngineModel, request_tokens: int, suffix_tokens: int,
                   chunk_size: int, lmcache: bool = False,
                   remote: bool = False) -> SingleRequest:
    """The simulator's cost of one request with nothing queued: what ``lmikit plan`` shows.

    vLLM tokenizes the whole prompt first, hit or miss. With ``lmcache`` (a deployment with
    an LMCache tier) every request also waits for LMCache's lookup before its step, and a
    miss waits while LMCache stores the prompt's full chunks, as every miss in the
    simulator does; with ``remote`` (a remote tier behind the local ones) the lookup asks
    the remote store about the first chunk no local tier holds, and a remote hit about
    each of its chunks too. A hit matches whole chunks of the prompt minus its new
    suffix; the remainder is prefilled attending to the matched context. The suffix is
    shorter than a chunk in the usual case, so nothing new is stored; a longer one pays the
    store of its full chunks.
    """
    overhead = m.coeff.request_overhead_s + request_tokens * m.coeff.tokenize_s_per_token
    full = sizing.chunk_aligned(request_tokens, chunk_size)  # what LMCache stores of it
    chunks = full // chunk_size
    miss = m.prefill_s(request_tokens, 0) + overhead
    if lmcache:
        miss += m.lookup_s(chunks, 1 if remote and chunks else 0) + m.store_s(full)
    matched = sizing.chunk_aligned(request_tokens - suffix_tokens, chunk_size)
    stored = full - matched
    after = 1 if stored else 0  # the first chunk past the hit, checked and missed
    # vLLM computes at least the last token, for its logits: a prompt that hits whole (no
    # suffix, chunk-aligned) prefills that one token after the rest
    matched = min(matched, request_tokens - 1)
    rest = request_tokens - matched
    base = m.prefill_s(rest, matched) + overhead
    hits: dict[str, float] = {}
    for tier in TIERS:
        hit = base + m.retrieve_s(tier, matched)
        if tier != "gpu":  # a hit from an LMCache tier: LMCache looked it up, stores the rest
            hit += m.store_s(stored)
        if tier != "gpu" or lmcache:
            checked = matched // chunk_size + after if tier == "remote" else \
                after if remote else 0
            hit += m.lookup_s(chunks, checked)
        hits[tier] = hit
    return SingleRequest(miss, hits, matched, rest)
