"""Fit the simulator's coefficients to a ``lmikit bench`` result file.

The bench file (format ``lmikit-bench/1``, written by ``lmikit bench --output``) lists every
request: when it started, its TTFT and end, prompt and output tokens, and, where known,
whether it hit the cache, from which tier and how many tokens were cached. Calibration
replays those requests at their recorded start times through the event loop, with each
request's cache outcome taken from the file, and searches the coefficients that explain the
measured TTFTs and decode times best (least squares on log ratios; rounds of a coordinate
search and Nelder-Mead, :func:`_search`).
Only coefficients the file has evidence for are fitted: retrieve efficiency needs CPU hits,
disk efficiency disk hits, remote bandwidth remote hits (the remote round trip is kept). A
request served by several tiers (part from the GPU pool, part from LMCache) is priced tier by
tier (``cached_by_tier``). The replay runs on as many model
copies as served the bench (``copies``, which ``lmikit bench`` reads from the endpoint), not on
the deployment being simulated: four requests in flight queue on one copy, not on eight.

>>> from lmikit.sim.scenario import deployment
>>> from lmikit.sim.workloads import long_doc_qa
>>> d = deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
>>> truth = Coefficients(prefill_mfu=0.45)
>>> bench = synthetic_bench(d.with_coefficients(truth), long_doc_qa(8, 4000, 16, 2), "cpu")
>>> round(fit(d, bench).coefficients.prefill_mfu, 2)
0.45
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit._files import FileRefused, read_limited
from lmikit.errors import SimulationError, safe_repr
from lmikit.sim.coefficients import Coefficients
from lmikit.sim.loop import RunResult, run
from lmikit.sim.routers import LeastOutstanding
from lmikit.sim.scenario import KV_MODES
from lmikit.sim.workloads import (
    MAX_ARRIVAL_S,
    MAX_PROMPT_CHUNKS,
    MAX_REQUEST_TOKENS,
    Phase,
    Request,
    Workload,
    finite,
)

if TYPE_CHECKING:
    from lmikit.sim.scenario import Deployment

FORMAT = "lmikit-bench/1"
# A fit replays the whole file up to 1,500 times: 1,000 requests take about 40 s on one
# core (benchmarks/simulate_limits.py measures it), so the file is bounded.
MAX_BENCH_REQUESTS = 5_000
MAX_BENCH_BYTES = 16 * 1024**2
MAX_BENCH_COPIES = 512  # as lmikit simulate --instances
# from the first request's start to the last's, as a trace's arrivals (the replay's clock)
MAX_BENCH_SPAN_S = MAX_ARRIVAL_S
TIER_NAMES = ("gpu", "cpu", "disk", "remote")
OUTCOME_SOURCES = ("measured", "predicted")
# kv_cache mode -> the tiers that can serve a prompt in it (lmikit.sim.scenario.deployment
# plans a CPU tier under a remote one; a disk tier only in cpu+disk)
MODE_TIERS: dict[str, tuple[str, ...]] = {
    "off": ("gpu",), "cpu": ("gpu", "cpu"), "cpu+disk": ("gpu", "cpu", "disk"),
    "remote": ("gpu", "cpu", "remote")}
# A measured TTFT or request time longer than this is not one: SageMaker ends a real-time
# invocation long before (InvokeEndpoint: 60 s to respond; a stream that runs past its
# allotted time ends in ModelStreamError ModelInvocationTimeExceeded), and lmikit's runtime
# client gives up on a stream silent for 300 s (lmikit.endpoint, read_timeout).
MAX_BENCH_SECONDS = 3600.0
# coefficient -> tier whose hits are its evidence (None: every request is evidence)
FITTED: dict[str, str | None] = {
    "prefill_mfu": None, "request_overhead_s": None, "decode_hbm_efficiency": None,
    "cpu_retrieve_efficiency": "cpu", "disk_read_efficiency": "disk", "remote_gbps": "remote",
}
# coefficient -> the catalog figure it is a share of (so at most 1.0)
BOUNDED = {"prefill_mfu": "tflops_per_gpu", "decode_hbm_efficiency": "hbm_gbps",
           "cpu_retrieve_efficiency": "host_to_gpu_gbps",
           "disk_read_efficiency": "nvme_read_gbps"}
START_BELOW_BOUND = 0.9
# replays a fit may take (benchmarks/simulate_limits.py times a 1,000-request file's); a fit
# stops sooner when a round of its search gains under 2%
MAX_EVALUATIONS = 1500
SEARCH_SPANS = (1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01)  # log space: x e^1 down to x 1.01
PAST_BOUND = 1.05  # where a fit at the bound looks whether the bench wants more


@dataclass(frozen=True)
class BenchRecord:
    round: str
    start_s: float
    ttft_s: float
    total_s: float
    prompt_tokens: int
    output_tokens: int
    hit: bool | None = None
    tier: str | None = None  # the tier that served most of its cached tokens
    cached_tokens: int | None = None
    # cached tokens per tier, in tier order ((tier, tokens), ...; tiers serving none left out)
    cached_by_tier: tuple[tuple[str, int], ...] | None = None
    # where the cache outcome came from: "measured" (the server's count of cached tokens),
    # "predicted" (the simulator's cache model, or a warm-up row's miss), None (not said)
    outcome_source: str | None = None
    prompt_source: str | None = None  # "measured" (the server's usage), "estimated", None

    def to_dict(self) -> dict[str, Any]:
        row = {k: v for k, v in self.__dict__.items() if k != "cached_by_tier"}
        if self.cached_by_tier is not None:
            row["cached_by_tier"] = dict(self.cached_by_tier)
        return row


@dataclass(frozen=True)
class BenchFile:
    model: str | None
    instance: str | None
    tp: int | None
    chunk_size: int
    kv_cache: str | None
    records: list[BenchRecord]
    copies: int | None = None  # model copies that served the bench (None: not recorded)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "model": self.model, "instance": self.instance,
                "tp": self.tp, "chunk_size": self.chunk_size, "kv_cache": self.kv_cache,
                "copies": self.copies, "requests": [r.to_dict() for r in self.records]}


def load_bench(path: str | Path) -> BenchFile:
    """Read and check a bench result file; errors name the request and field."""
    p = Path(path)
    try:
        data = json.loads(read_limited(p, MAX_BENCH_BYTES, f"bench file {str(p)!r}"))
    except FileRefused as exc:
        raise SimulationError(str(exc)) from exc
    except ValueError as exc:
        raise SimulationError(f"cannot read bench file {str(p)!r}: {exc}") from exc
    except RecursionError as exc:
        raise SimulationError(f"cannot read bench file {str(p)!r}: it nests too deeply "
                              "to be a lmikit bench file") from exc
    return bench_from_dict(data, str(p))


def bench_from_dict(data: Any, where: str = "bench file") -> BenchFile:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SimulationError(f"{where}: not a {FORMAT} file (write one with lmikit bench "
                              "--output)")
    rows = data.get("requests")
    if not isinstance(rows, list) or not rows:
        raise SimulationError(f"{where}: 'requests' must be a non-empty list")
    if len(rows) > MAX_BENCH_REQUESTS:
        raise SimulationError(f"{where}: {len(rows):,} requests; a fit takes at most "
                              f"{MAX_BENCH_REQUESTS:,}")
    chunk = data.get("chunk_size", 256)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise SimulationError(f"{where}: chunk_size must be a positive integer (got "
                              f"{safe_repr(chunk)})")
    copies = data.get("copies")
    if copies is not None and (isinstance(copies, bool) or not isinstance(copies, int)
                               or not 1 <= copies <= MAX_BENCH_COPIES):
        raise SimulationError(f"{where}: copies must be a whole number from 1 to "
                              f"{MAX_BENCH_COPIES} (the model copies that served the bench), "
                              f"or null (got {safe_repr(copies)})")
    for name in ("model", "instance"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise SimulationError(f"{where}: {name} must be a string or null (got "
                                  f"{safe_repr(data[name])})")
    tp = data.get("tp")
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise SimulationError(f"{where}: tp must be a whole number of at least 1 (GPUs per "
                              f"model copy), or null (got {safe_repr(tp)})")
    kv_cache = _one_of_or_null(f"{where}: kv_cache", data.get("kv_cache"), KV_MODES)
    records = []
    chunks = 0
    for n, row in enumerate(rows):
        rec = _record(row, f"{where}: requests[{n}]", kv_cache)
        chunks += rec.prompt_tokens // chunk
        if chunks > MAX_PROMPT_CHUNKS:
            raise SimulationError(f"{where}: more than {MAX_PROMPT_CHUNKS:,} full chunks of "
                                  f"prompt by requests[{n}]; a fit holds at most "
                                  f"{MAX_PROMPT_CHUNKS:,}")
        records.append(rec)
    starts = [r.start_s for r in records]
    if max(starts) - min(starts) > MAX_BENCH_SPAN_S:
        n = starts.index(max(starts))
        raise SimulationError(f"{where}: requests[{n}].start_s {safe_repr(max(starts))} is "
                              f"{max(starts) - min(starts):,.0f} s after the first request's; "
                              f"a bench spans at most {MAX_BENCH_SPAN_S:,.0f} s (30 days)")
    return BenchFile(data.get("model"), data.get("instance"), tp, chunk, kv_cache, records,
                     copies)


def _one_of_or_null(field: str, value: Any, valid: tuple[str, ...]) -> str | None:
    """A field that names one of ``valid`` or is null, else an error naming it."""
    if value is not None and value not in valid:
        raise SimulationError(f"{field} must be one of {', '.join(valid)}, or null (got "
                              f"{safe_repr(value)})")
    return value


def _whole(at: str, name: str, value: Any, low: int, high: int, high_is: str = "") -> int:
    """A whole-number field (an integral float such as 4000.0 too), else an error naming it;
    ``high_is`` says what the upper bound is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not low <= value <= high or not math.isfinite(value) or value != int(value):
        raise SimulationError(f"{at}.{name} must be a whole number from {low:,} to "
                              f"{high_is + ' ' if high_is else ''}{high:,} "
                              f"(got {safe_repr(value)})")
    return int(value)


def _seconds(at: str, name: str, value: Any) -> float:
    """A measured duration: a finite number above 0 s and at most MAX_BENCH_SECONDS."""
    try:
        good = not isinstance(value, bool) and isinstance(value, (int, float)) \
            and math.isfinite(value) and 0 < value <= MAX_BENCH_SECONDS
    except OverflowError:  # an int past a float's range
        good = False
    if not good:
        raise SimulationError(f"{at}.{name} must be a number of seconds above 0 and at most "
                              f"{MAX_BENCH_SECONDS:,.0f} (got {safe_repr(value)})")
    return float(value)


def _record(row: Any, at: str, kv_cache: str | None) -> BenchRecord:
    """One request of a bench file, checked field by field."""
    if not isinstance(row, dict):
        raise SimulationError(f"{at} must be an object")
    missing = [k for k in ("start_s", "ttft_s", "total_s", "prompt_tokens", "output_tokens")
               if k not in row]
    if missing:
        raise SimulationError(f"{at} needs {', '.join(missing)} (numbers: seconds, and tokens)")
    if not isinstance(row.get("round", ""), str):
        raise SimulationError(f"{at}.round must be a string (got {safe_repr(row['round'])})")
    ttft = _seconds(at, "ttft_s", row["ttft_s"])
    total = _seconds(at, "total_s", row["total_s"])
    if total < ttft:
        raise SimulationError(f"{at}.total_s must be at least its ttft_s {ttft:g} s (got "
                              f"{safe_repr(row['total_s'])}): both count from the request's start")
    prompt = _whole(at, "prompt_tokens", row["prompt_tokens"], 1, MAX_REQUEST_TOKENS)
    output = _whole(at, "output_tokens", row["output_tokens"], 1, MAX_REQUEST_TOKENS)
    if prompt + output > MAX_REQUEST_TOKENS:
        raise SimulationError(f"{at} has {prompt:,} prompt and {output:,} output tokens; at "
                              f"most {MAX_REQUEST_TOKENS:,} together")
    hit = row.get("hit")
    if hit is not None and not isinstance(hit, bool):
        raise SimulationError(f"{at}.hit must be true, false or null (unknown) "
                              f"(got {safe_repr(hit)})")
    tier = _one_of_or_null(f"{at}.tier", row.get("tier"), TIER_NAMES)
    source = _one_of_or_null(f"{at}.outcome_source", row.get("outcome_source"),
                             OUTCOME_SOURCES)
    if hit is None and source is not None:
        raise SimulationError(f"{at}: hit is null (unknown), yet outcome_source is "
                              f"{safe_repr(source)}")
    prompt_source = _one_of_or_null(f"{at}.prompt_source", row.get("prompt_source"),
                                    ("measured", "estimated"))
    cached = row.get("cached_tokens")
    if cached is not None:
        cached = _whole(at, "cached_tokens", cached, 0, prompt, "its prompt_tokens")
    by_tier = _cached_by_tier(row.get("cached_by_tier"), at, prompt)
    if by_tier is not None:
        summed = sum(v for _, v in by_tier)
        if cached is not None and cached != summed:
            raise SimulationError(f"{at}.cached_tokens {cached} is not the sum of its "
                                  f"cached_by_tier ({summed})")
        cached = summed
        top = max(by_tier, key=lambda kv: kv[1])[0] if by_tier else None
        if tier is not None and tier != top:
            raise SimulationError(f"{at}.tier {safe_repr(tier)} is not the tier that served "
                                  "most of "
                                  f"its cached_by_tier ({safe_repr(top)})")
        tier = tier or top
    if hit is False and (tier is not None or cached):
        raise SimulationError(f"{at}: hit is false, yet tier {safe_repr(tier)} and cached_tokens "
                              f"{safe_repr(cached)} say it was cached; a miss has neither")
    if hit is None and (tier is not None or cached is not None):
        raise SimulationError(f"{at}: hit is null (unknown), yet tier {safe_repr(tier)} and "
                              f"cached_tokens {safe_repr(cached)} say what was cached; give "
                              "hit true with them, or leave them out")
    if hit is True and cached == 0:
        raise SimulationError(f"{at}: hit is true, yet cached_tokens is 0; a hit has cached "
                              "tokens (a request that had none is a miss: hit false)")
    served_by = [t for t, _ in (by_tier or ())] + ([tier] if tier else [])
    allowed = MODE_TIERS.get(kv_cache or "", TIER_NAMES)
    for t in served_by:
        if t not in allowed:
            has = "GPU prefix cache only" if kv_cache == "off" else \
                f"its tiers: {', '.join(allowed)}"
            raise SimulationError(f"{at} was served from the {t} tier, but the bench file's "
                                  f"kv_cache is {kv_cache} ({has})")
    return BenchRecord(row.get("round", ""), finite(f"{at}.start_s", row["start_s"]), ttft,
                       total, prompt, output, hit, tier, cached, by_tier, source,
                       prompt_source)


def _cached_by_tier(value: Any, at: str, prompt: int) -> tuple[tuple[str, int], ...] | None:
    """``{"gpu": 3328, "cpu": 512}``: a request's cached tokens per tier, in tier order."""
    if value is None:
        return None
    if not isinstance(value, dict) or any(k not in TIER_NAMES for k in value):
        raise SimulationError(f"{at}.cached_by_tier must be an object whose keys are tiers "
                              f"({', '.join(TIER_NAMES)}) (got {safe_repr(value)})")
    pairs = tuple((t, _whole(at, f"cached_by_tier.{t}", value[t], 0, prompt,
                             "its prompt_tokens"))
                  for t in TIER_NAMES if t in value)
    if sum(v for _, v in pairs) > prompt:
        raise SimulationError(f"{at}.cached_by_tier holds {sum(v for _, v in pairs):,} tokens, "
                              f"more than its prompt_tokens {prompt:,}")
    return tuple((t, v) for t, v in pairs if v)


def _outcome(rec: BenchRecord, kv_cache: str | None,
             chunk: int) -> tuple[tuple[str, int], ...]:
    """``rec``'s cached tokens per tier, in tier order (empty for a miss), at most its
    prompt less one token (vLLM computes the last token of every prompt)."""
    if not rec.hit:
        return ()
    if rec.cached_by_tier is not None:
        parts: tuple[tuple[str, int], ...] = rec.cached_by_tier
    else:
        tier = rec.tier or ("gpu" if kv_cache in (None, "off") else "cpu")
        cached = rec.cached_tokens if rec.cached_tokens is not None \
            else (rec.prompt_tokens // chunk) * chunk
        parts = ((tier, cached),)
    return capped(parts, rec.prompt_tokens - 1)


def capped(parts: tuple[tuple[str, int], ...], limit: int) -> tuple[tuple[str, int], ...]:
    """Cached tokens per tier (in tier order) cut to ``limit`` tokens in all, the deepest
    tier's share first (the prompt's last tokens are in it).

    >>> capped((("gpu", 512), ("cpu", 256)), 600)
    (('gpu', 512), ('cpu', 88))
    """
    out = list(parts)
    over = sum(v for _, v in out) - max(0, limit)
    while over > 0 and out:
        tier, v = out.pop()
        if v > over:
            out.append((tier, v - over))
        over -= v
    return tuple(out)


def evidence_mask(bench: BenchFile) -> list[bool]:
    """Which requests' times are evidence for the fit: those whose cache outcome is known
    (where the file has measured outcomes, only the measured ones), and the tier of a hit
    too wherever a tier besides the GPU pool could have served it. The rest are replayed
    as load only."""
    measured = any(r.outcome_source == "measured" for r in bench.records)
    return [r.hit is not None and not (measured and r.outcome_source != "measured")
            and not (r.hit and r.tier is None and r.cached_by_tier is None
                     and bench.kv_cache != "off")
            for r in bench.records]


def _left_out(bench: BenchFile, mask: list[bool]) -> list[str]:
    """Notes on the requests ``mask`` leaves out of the fit, and on predicted outcomes."""
    recs = bench.records
    measured = any(r.outcome_source == "measured" for r in recs)
    out = []
    unknown = sum(r.hit is None for r in recs)
    if unknown:
        out.append(f"{unknown} request(s) with an unknown cache outcome ('hit': null) are "
                   "replayed as load (as misses) but left out of the fit")
    predicted = sum(r.hit is not None and r.outcome_source != "measured" for r in recs)
    if measured and predicted:
        out.append(f"{predicted} request(s) whose cache outcome is predicted, not measured, "
                   "are replayed as load but left out of the fit: it rests on the measured "
                   "ones")
    no_tier = sum(r.hit is not None and not ok and r.hit and r.tier is None
                  for r, ok in zip(recs, mask, strict=True)
                  if not (measured and r.outcome_source != "measured"))
    if no_tier:
        out.append(f"{no_tier} hit(s) whose tier is unknown (the server counts cached tokens, "
                   "not where they came from) are replayed as load but left out of the fit")
    if not measured and any(r.outcome_source == "predicted" for r in recs):
        out.append("every cache outcome in the file is predicted by lmikit's cache model, "
                   "not measured (the server sent no usage.prompt_tokens_details."
                   "cached_tokens: LMI does not start vLLM with "
                   "--enable-prompt-tokens-details); a request served otherwise than "
                   "predicted (routed to another copy, evicted sooner) is priced wrongly")
    return out


def replay_workload(bench: BenchFile) -> Workload:
    """The bench's requests as an open-loop trace with their measured cache outcomes."""
    t0 = min(r.start_s for r in bench.records)
    chunk = bench.chunk_size
    requests = []
    stride = 1 + max(rec.prompt_tokens // chunk for rec in bench.records)  # no key shared
    for i, rec in enumerate(bench.records):
        keys = tuple(range(i * stride, i * stride + rec.prompt_tokens // chunk))
        requests.append(Request(i, keys, rec.prompt_tokens, rec.output_tokens, session=i,
                                arrival_s=rec.start_s - t0,
                                forced=_outcome(rec, bench.kv_cache, chunk)))
    return Workload("bench-replay", [Phase("replay", [[r] for r in requests], open_loop=True)],
                    chunk)


def replay(dep: Deployment, bench: BenchFile, coeff: Coefficients) -> tuple[list[float],
                                                                            list[float]]:
    """Predicted (TTFT, decode time) of every bench request under ``coeff``, on as many
    copies as served the bench (``dep.instances`` where the file does not say)."""
    mode = bench.kv_cache if bench.kv_cache in dep.tier_tokens else "off"
    work = replay_workload(bench)
    served = replace(dep, instances=bench.copies or dep.instances)
    out = run(work, served.with_coefficients(coeff).copies(mode), LeastOutstanding())
    t0 = min(r.start_s for r in bench.records)
    ttft = [out.ttft[i] - (rec.start_s - t0) for i, rec in enumerate(bench.records)]
    decode = [out.end[i] - out.ttft[i] for i in range(len(bench.records))]
    return ttft, decode


def _loss(dep: Deployment, bench: BenchFile, coeff: Coefficients, mask: list[bool]) -> float:
    ttft, decode = replay(dep, bench, coeff)
    total = 0.0
    for rec, t, d, ok in zip(bench.records, ttft, decode, mask, strict=True):
        if not ok:  # replayed as load: its outcome is not known well enough to be evidence
            continue
        total += math.log(max(t, 1e-9) / rec.ttft_s) ** 2
        measured_decode = rec.total_s - rec.ttft_s
        if rec.output_tokens > 1 and measured_decode > 0:
            total += math.log(max(d, 1e-9) / measured_decode) ** 2
    return total


def ttft_error(dep: Deployment, bench: BenchFile, coeff: Coefficients,
               mask: list[bool] | None = None) -> float:
    """Mean absolute relative error of the predicted TTFTs (of the requests that are
    evidence, :func:`evidence_mask`)."""
    mask = evidence_mask(bench) if mask is None else mask
    ttft, _ = replay(dep, bench, coeff)
    errs = [abs(t - r.ttft_s) / r.ttft_s
            for r, t, ok in zip(bench.records, ttft, mask, strict=True) if ok]
    return sum(errs) / len(errs)


@dataclass(frozen=True)
class Fit:
    coefficients: Coefficients
    fitted: list[str]
    ttft_error_before: float
    ttft_error_after: float
    requests: int
    notes: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """What the CLI prints: the TTFT error before and after the fit, then each note."""
        return [f"Calibrated on {self.requests} measured requests: TTFT error "
                f"{self.ttft_error_before:.1%} -> {self.ttft_error_after:.1%} (fitted "
                f"{', '.join(self.fitted)})", *(f"  - {n}" for n in self.notes)]

    def to_dict(self) -> dict[str, Any]:
        # six significant figures, not decimals: tokenize_s_per_token is ~2e-6
        return {"coefficients": {k: float(f"{v:.6g}") if isinstance(v, float) else v
                                 for k, v in self.coefficients.to_dict().items()},
                "fitted": self.fitted, "ttft_error_before": round(self.ttft_error_before, 4),
                "ttft_error_after": round(self.ttft_error_after, 4),
                "requests": self.requests, "notes": self.notes}


def fit(dep: Deployment, bench: BenchFile, start: Coefficients | None = None,
        max_evaluations: int = MAX_EVALUATIONS,
        progress: Callable[[int, int], None] | None = None) -> Fit:
    """Coefficients that best explain ``bench`` on ``dep`` (in log space: rounds of a
    coordinate search and Nelder-Mead, :func:`_search`).

    ``progress(done, at_most)`` is called after each replay of the bench (one evaluation).
    """
    if bench.chunk_size != dep.chunk_size:
        raise SimulationError(f"the bench ran with chunk_size {bench.chunk_size} but the "
                              f"deployment uses {dep.chunk_size}")
    for name, value in (("model", dep.model_id), ("instance", dep.instance_type),
                        ("tp", dep.tp)):
        given = getattr(bench, name)
        if given is not None and str(given).lower() != str(value).lower():
            raise SimulationError(f"the bench file was measured with {name} "
                                  f"{safe_repr(given)}, not {safe_repr(value)}; calibrate a "
                                  "deployment that matches it (the "
                                  "spec it was measured with, or --model/--instance/--tp)")
    if bench.kv_cache is not None and bench.kv_cache not in dep.tier_tokens:
        raise SimulationError(f"the bench file was measured with kv_cache "
                              f"{safe_repr(bench.kv_cache)}, which this deployment cannot replay: "
                              f"{dep.mode_problem(bench.kv_cache)}")
    for n, r in enumerate(bench.records):
        if dep.max_model_len and r.prompt_tokens + r.output_tokens > dep.max_model_len:
            raise SimulationError(
                f"bench request {n} has {r.prompt_tokens:,} prompt and {r.output_tokens:,} "
                f"output tokens, over the deployment's context window of "
                f"{dep.max_model_len:,} (vLLM would have refused it): the bench was not "
                "measured on this deployment")
    mask = evidence_mask(bench)
    if all(r.hit is None for r in bench.records):
        raise SimulationError("no request in the bench file says whether it hit the cache "
                              "(every 'hit' is null); write it with lmikit bench --output "
                              "from the deployment's spec, which labels each request")
    if not any(mask):
        raise SimulationError("no request in the bench file is evidence for a fit: every "
                              "hit's tier is unknown, and the file's kv_cache has tiers "
                              "besides the GPU pool")
    base = start or dep.engine.coeff
    tiers = {t for r, ok in zip(bench.records, mask, strict=True) if ok
             for t, _ in _outcome(r, bench.kv_cache, bench.chunk_size)}
    names = [n for n, tier in FITTED.items() if tier is None or tier in tiers]
    notes = [f"{n} kept at {getattr(base, n)}: the bench has no {tier} hits"
             for n, tier in FITTED.items() if n not in names]
    notes += _left_out(bench, mask)
    prefilled = {r.prompt_tokens - sum(v for _, v in _outcome(r, bench.kv_cache,
                                                                bench.chunk_size))
                 for r, ok in zip(bench.records, mask, strict=True) if ok}
    if len(prefilled) == 1:
        notes.append(f"every request with a known outcome prefilled the same "
                     f"{prefilled.pop():,} tokens, so prefill_mfu and request_overhead_s are "
                     "told apart only by how the requests queued; a bench with short "
                     "requests too (lmikit bench sends two first) separates them")
    if bench.copies is None and dep.instances > 1:
        notes.append(f"the bench file does not say how many model copies served it; replayed "
                     f"on {dep.instances}, the deployment's (lmikit bench records it)")

    def coeff_at(x: list[float]) -> Coefficients:
        values = {}
        for name, v in zip(names, x, strict=True):
            value = math.exp(v)
            values[name] = min(value, 1.0) if name in BOUNDED else value
        return base.replace(**values)

    evaluations = 0

    def loss(x: list[float]) -> float:
        nonlocal evaluations
        # past a bound of 1.0 the coefficient is held at 1.0; the penalty keeps the simplex
        # from wandering on that plateau and leads it back to the bound
        value = _loss(dep, bench, coeff_at(x), mask) + sum(
            v * v for name, v in zip(names, x, strict=True) if name in BOUNDED and v > 0)
        evaluations += 1
        if progress is not None:
            progress(evaluations, max_evaluations)
        return value

    # a bounded coefficient starts inside its bound (disk_read_efficiency's default is the
    # bound itself): a simplex started there has half its points on the plateau past it
    best_x = [math.log(min(getattr(base, n), START_BELOW_BOUND) if n in BOUNDED
                       else getattr(base, n)) for n in names]
    best_x = _search(loss, best_x, max_evaluations)
    coeff = coeff_at(best_x)
    # at its bound, a coefficient says the bench is faster than the hardware allows only if
    # going past the bound would explain the bench better; a bench that sits on the bound
    # (the catalog's figure, reached) is no such sign
    pinned = [n for n in names if n in BOUNDED and getattr(coeff, n) >= 1.0 - 1e-9]
    at_bound = _loss(dep, bench, coeff, mask) if pinned else 0.0
    notes += [f"{n} reached its bound 1.0: the bench is faster than {dep.instance_type}'s "
              f"catalog figures allow for {dep.model_id}; check that it was measured on "
              "this model and instance type" for n in pinned
              if _loss(_faster(dep, n), bench, coeff, mask) < 0.99 * at_bound]
    return Fit(coeff, names, ttft_error(dep, bench, base, mask),
               ttft_error(dep, bench, coeff, mask),
               len(bench.records), notes)


class _OutOfEvaluations(Exception):
    pass


def _search(f: Callable[[list[float]], float], x0: list[float],
            max_evaluations: int) -> list[float]:
    """The point of lowest ``f`` found within ``max_evaluations`` calls.

    A replay's loss is piecewise: requests that share steps, queue or finish in another order
    move it in steps, so a simplex alone can settle on a ledge (a disk-tier bench from known
    coefficients once stopped with request_overhead_s 66% off). So each round is a coordinate
    search, which tries each coefficient at 3 points either side at spans of 1, 0.5, 0.25,
    0.1, 0.05, 0.02 and 0.01 in log space (stepping over a ledge, not only down its slope),
    then Nelder-Mead from the best point found; rounds go on while one gains over 2%.
    """
    calls = 0
    best: tuple[float, list[float]] = (math.inf, x0)

    def g(x: list[float]) -> float:
        nonlocal calls, best
        if calls >= max_evaluations:
            raise _OutOfEvaluations
        calls += 1
        value = f(x)
        if value < best[0]:
            best = (value, list(x))
        return value

    try:
        x, fx = x0, g(x0)
        while True:
            before = fx
            for span in SEARCH_SPANS:
                moved = True
                while moved:
                    moved = False
                    for i in range(len(x)):
                        for k in (-3, -2, -1, 1, 2, 3):
                            y = list(x)
                            y[i] += span * k / 3
                            fy = g(y)
                            if fy < fx:
                                x, fx, moved = y, fy, True
            for step in (0.1, 0.03):
                x = _nelder_mead(g, x, 300, step)
            fx = g(x)
            if fx > 0.98 * before:
                break
    except _OutOfEvaluations:
        pass
    return best[1]


def _faster(dep: Deployment, name: str) -> Deployment:
    """``dep`` with the catalog figure behind bounded coefficient ``name`` 5% higher: the
    coefficient past its bound of 1.0, which it cannot be set to."""
    figure = BOUNDED[name]
    return replace(dep, engine=replace(dep.engine, **{
        figure: getattr(dep.engine, figure) * PAST_BOUND}))


def _nelder_mead(f: Any, x0: list[float], max_evaluations: int,
                 step: float = 0.3) -> list[float]:
    """Minimize ``f`` from ``x0`` (the textbook simplex method; no dependencies)."""
    n = len(x0)
    simplex = [x0] + [[v + (step if i == j else 0.0) for j, v in enumerate(x0)]
                      for i in range(n)]
    values = [f(x) for x in simplex]
    evaluations = n + 1
    while evaluations < max_evaluations:
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < 1e-14 and max(
                abs(a - b) for x in simplex[1:] for a, b in zip(x, simplex[0], strict=True)) < 1e-7:
            break
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]

        def toward(t: float, w: list[float] = worst,
                   mid: list[float] = centroid) -> list[float]:
            return [c + t * (wj - c) for c, wj in zip(mid, w, strict=True)]

        reflected = toward(-1.0)
        fr = f(reflected)
        evaluations += 1
        if fr < values[0]:
            expanded = toward(-2.0)
            fe = f(expanded)
            evaluations += 1
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = toward(0.5 if fr >= values[-1] else -0.5)
            fc = f(contracted)
            evaluations += 1
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = contracted, fc
            else:
                first = simplex[0]
                simplex = [first] + [[b + 0.5 * (v - b) for b, v in zip(first, x, strict=True)]
                                     for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
                evaluations += n
    return simplex[min(range(n + 1), key=values.__getitem__)]


def expected_outcomes(dep: Deployment, workload: Workload, mode: str,
                      routing: str) -> list[dict[str, int]]:
    """Where each measured request of ``workload`` on ``dep`` should find its prompt cached:
    its cached tokens per tier (``{"gpu": 3328, "cpu": 512}``; empty for a miss), in the
    workload's order. ``lmikit bench`` writes these for its query round, since a client
    cannot see which tier answered: which one does is a matter of capacities (the plan's GPU
    pool and LMCache tiers), LRU order and routing, which this runs; timing hardly moves it.
    """
    out = run(workload, dep.copies(mode), dep.router(routing, random.Random(0)),
              random.Random(1))
    return [served_by_tier(out, r.id)
            for p in workload.phases if p.measured for s in p.sessions for r in s]


def served_by_tier(out: RunResult, request_id: int) -> dict[str, int]:
    """A request's cached tokens per tier that served any, in tier order."""
    return {t: out.served[t][request_id] for t in TIER_NAMES
            if t in out.served and out.served[t][request_id]}


def measured_outcome(cached: int, predicted: Mapping[str, int] | None, kv_cache: str | None,
                     chunk: int) -> dict[str, int] | None:
    """Cached tokens per tier for a request whose server counted ``cached`` prompt tokens
    from its caches (vLLM: GPU prefix cache plus KV connector, one number): a miss at 0;
    the GPU pool's where ``kv_cache`` is off; the ``predicted`` split where its total is
    within one ``chunk`` of the count (vLLM's GPU blocks are finer than LMCache's chunks,
    so the GPU share, or the first, takes the difference); else None, the tier unknown.

    >>> measured_outcome(3824, {"gpu": 3328, "cpu": 512}, "cpu", 256)
    {'gpu': 3312, 'cpu': 512}
    >>> measured_outcome(0, {"gpu": 3840}, "cpu", 256), measured_outcome(3840, {}, "cpu", 256)
    ({}, None)
    """
    if cached == 0:
        return {}
    if kv_cache == "off":
        return {"gpu": cached}
    if not predicted or abs(sum(predicted.values()) - cached) >= chunk:
        return None
    parts = dict(predicted)
    first, more = next(iter(parts)), cached - sum(parts.values())
    if parts[first] + more <= 0:
        return dict(capped(tuple(parts.items()), cached))
    parts[first] += more
    return parts


def outcome_fields(by_tier: dict[str, int]) -> dict[str, Any]:
    """A bench file row's cache fields for cached tokens per tier (empty: a miss)."""
    if not by_tier:
        return {"hit": False, "tier": None, "cached_tokens": None, "cached_by_tier": None}
    return {"hit": True, "tier": max(by_tier, key=lambda t: by_tier[t]),
            "cached_tokens": sum(by_tier.values()), "cached_by_tier": dict(by_tier)}


def synthetic_bench(dep: Deployment, workload: Workload, mode: str) -> BenchFile:
    """A bench file as ``dep`` (with its coefficients) would produce it: for tests."""
    from lmikit.sim.routers import StickySession

    out = run(workload, dep.copies(mode), StickySession())
    records = []
    for p in workload.phases:
        for s in p.sessions:
            for r in s:
                fields = outcome_fields(served_by_tier(out, r.id))
                by_tier = fields.pop("cached_by_tier")
                records.append(BenchRecord(
                    p.name, out.arrival[r.id], out.ttft[r.id] - out.arrival[r.id],
                    out.end[r.id] - out.arrival[r.id], r.prompt_tokens, r.output_tokens,
                    **fields, cached_by_tier=tuple(by_tier.items()) if by_tier else None,
                    outcome_source="measured", prompt_source="measured"))
    return BenchFile(dep.model_id, dep.instance_type, dep.tp, dep.chunk_size, mode, records,
                     dep.instances)
