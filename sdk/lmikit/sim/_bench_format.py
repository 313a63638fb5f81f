"""The ``lmikit-bench/1`` file that ``lmikit bench --output`` writes and ``--calibrate`` reads.

One object: ``model``, ``instance``, ``tp``, ``chunk_size``, ``kv_cache`` and ``copies`` (what
the bench was measured on), and ``requests``, one row per request: when it started, its TTFT
and end, prompt and output tokens, and, where known, whether it hit the cache, from which
tier and how many tokens were cached, and whether that outcome was measured or predicted.
Loading checks every field and says which request and field is wrong.

>>> b = bench_from_dict({"format": FORMAT, "kv_cache": "cpu", "requests": [
...     {"start_s": 0, "ttft_s": 0.5, "total_s": 0.9, "prompt_tokens": 4012,
...      "output_tokens": 16, "hit": True, "cached_by_tier": {"gpu": 3328, "cpu": 512}}]})
>>> b.records[0].tier, b.records[0].cached_tokens
('gpu', 3840)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmikit._files import FileRefused, read_limited
from lmikit.errors import SimulationError, safe_repr
from lmikit.sim._scenario import KV_MODES
from lmikit.sim._workloads import MAX_ARRIVAL_S, MAX_PROMPT_CHUNKS, MAX_REQUEST_TOKENS, finite

FORMAT = "lmikit-bench/1"
# A fit replays the whole file many times (at most lmikit.sim._calibrate.MAX_EVALUATIONS,
# within MAX_FIT_SECONDS), so the file is bounded too.
MAX_BENCH_REQUESTS = 5_000
MAX_BENCH_BYTES = 16 * 1024**2
MAX_BENCH_COPIES = 512  # as lmikit simulate --instances
# from the first request's start to the last's, as a trace's arrivals (the replay's clock)
MAX_BENCH_SPAN_S = MAX_ARRIVAL_S
TIER_NAMES = ("gpu", "cpu", "disk", "remote")
OUTCOME_SOURCES = ("measured", "predicted")
# kv_cache mode -> the tiers that can serve a prompt in it (lmikit.sim._scenario.deployment
# plans a CPU tier under a remote one; a disk tier only in cpu+disk)
MODE_TIERS: dict[str, tuple[str, ...]] = {
    "off": ("gpu",), "cpu": ("gpu", "cpu"), "cpu+disk": ("gpu", "cpu", "disk"),
    "remote": ("gpu", "cpu", "remote")}
# A measured TTFT or request time longer than this is not one: SageMaker ends a real-time
# invocation long before (InvokeEndpoint: 60 s to respond; a stream that runs past its
# allotted time ends in ModelStreamError ModelInvocationTimeExceeded), and lmikit's runtime
# client gives up on a stream silent for 300 s (lmikit.client._endpoint, read_timeout).
MAX_BENCH_SECONDS = 3600.0


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
    excluded: str | None = None  # why the bench says its times are not evidence (None: are)

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
    adapter: str | None = None  # the LoRA adapter every request went to (None: the base)
    stopped: str | None = None  # why the run ended before its last request (None: it ran all)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "model": self.model, "instance": self.instance,
                "tp": self.tp, "chunk_size": self.chunk_size, "kv_cache": self.kv_cache,
                "copies": self.copies, "adapter": self.adapter,
                "complete": self.stopped is None, "stopped": self.stopped,
                "requests": [r.to_dict() for r in self.records]}


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
    for name in ("model", "instance", "adapter", "stopped"):
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
    stopped = data.get("stopped")
    if data.get("complete", True) is False and stopped is None:
        stopped = "the run stopped early (the file does not say why)"
    return BenchFile(data.get("model"), data.get("instance"), tp, chunk, kv_cache, records,
                     copies, data.get("adapter"), stopped)


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
    excluded = row.get("excluded")
    if excluded is not None and not isinstance(excluded, str):
        raise SimulationError(f"{at}.excluded must be a string (why the request is no "
                              f"evidence) or null (got {safe_repr(excluded)})")
    return BenchRecord(row.get("round", ""), finite(f"{at}.start_s", row["start_s"]), ttft,
                       total, prompt, output, hit, tier, cached, by_tier, source,
                       prompt_source, excluded)


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
