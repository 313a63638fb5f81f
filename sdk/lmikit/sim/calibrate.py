"""Fit the simulator's coefficients to a ``lmikit bench`` result file.

The bench file (format ``lmikit-bench/1``, written by ``lmikit bench --output``) lists every
request: when it started, its TTFT and end, prompt and output tokens, and, where known,
whether it hit the cache, from which tier and how many tokens were cached. Calibration
replays those requests at their recorded start times through the event loop, with each
request's cache outcome taken from the file, and searches the coefficients that explain the
measured TTFTs and decode times best (least squares on log ratios, coordinate search).
Only coefficients the file has evidence for are fitted: retrieve efficiency needs CPU hits,
disk efficiency disk hits, remote bandwidth remote hits. The replay runs on as many model
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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit._files import FileRefused, read_limited
from lmikit.errors import SimulationError
from lmikit.sim.coefficients import Coefficients
from lmikit.sim.loop import RunResult, run
from lmikit.sim.routers import LeastOutstanding
from lmikit.sim.workloads import (
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
TIER_NAMES = ("gpu", "cpu", "disk", "remote")
# coefficient -> tier whose hits are its evidence (None: every request is evidence)
FITTED: dict[str, str | None] = {
    "prefill_mfu": None, "request_overhead_s": None, "decode_hbm_efficiency": None,
    "cpu_retrieve_efficiency": "cpu", "disk_read_efficiency": "disk", "remote_gbps": "remote",
}
BOUNDED = {"prefill_mfu", "decode_hbm_efficiency", "cpu_retrieve_efficiency",
           "disk_read_efficiency"}


@dataclass(frozen=True)
class BenchRecord:
    round: str
    start_s: float
    ttft_s: float
    total_s: float
    prompt_tokens: int
    output_tokens: int
    hit: bool | None = None
    tier: str | None = None
    cached_tokens: int | None = None


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
                "copies": self.copies, "requests": [r.__dict__ for r in self.records]}


def load_bench(path: str | Path) -> BenchFile:
    """Read and check a bench result file; errors name the request and field."""
    p = Path(path)
    try:
        data = json.loads(read_limited(p, MAX_BENCH_BYTES, f"bench file {str(p)!r}"))
    except FileRefused as exc:
        raise SimulationError(str(exc)) from exc
    except ValueError as exc:
        raise SimulationError(f"cannot read bench file {str(p)!r}: {exc}") from exc
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
        raise SimulationError(f"{where}: chunk_size must be a positive integer")
    copies = data.get("copies")
    if copies is not None and (isinstance(copies, bool) or not isinstance(copies, int)
                               or not 1 <= copies <= MAX_BENCH_COPIES):
        raise SimulationError(f"{where}: copies must be a whole number from 1 to "
                              f"{MAX_BENCH_COPIES} (the model copies that served the bench), "
                              f"or null (got {copies!r})")
    records = []
    chunks = 0
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SimulationError(f"{where}: requests[{n}] must be an object")
        try:
            at = f"{where}: requests[{n}]."
            rec = BenchRecord(
                round=str(row.get("round", "")), start_s=finite(at + "start_s", row["start_s"]),
                ttft_s=finite(at + "ttft_s", row["ttft_s"]),
                total_s=finite(at + "total_s", row["total_s"]),
                prompt_tokens=int(finite(at + "prompt_tokens", row["prompt_tokens"], 1)),
                output_tokens=int(finite(at + "output_tokens", row["output_tokens"], 1)),
                hit=row.get("hit"), tier=row.get("tier"), cached_tokens=row.get("cached_tokens"))
        except KeyError as exc:
            raise SimulationError(f"{where}: requests[{n}] needs numeric start_s, ttft_s, "
                                  f"total_s, prompt_tokens, output_tokens ({exc})") from exc
        if rec.hit is not None and not isinstance(rec.hit, bool):
            raise SimulationError(f"{where}: requests[{n}].hit must be true, false or null "
                                  f"(unknown) (got {rec.hit!r})")
        if rec.prompt_tokens + rec.output_tokens > MAX_REQUEST_TOKENS:
            raise SimulationError(f"{where}: requests[{n}] has {rec.prompt_tokens:,} prompt and "
                                  f"{rec.output_tokens:,} output tokens; at most "
                                  f"{MAX_REQUEST_TOKENS:,} together")
        if rec.cached_tokens is not None and (
                isinstance(rec.cached_tokens, bool) or not isinstance(rec.cached_tokens, int)
                or not 0 <= rec.cached_tokens <= rec.prompt_tokens):
            raise SimulationError(f"{where}: requests[{n}].cached_tokens must be a whole number "
                                  f"from 0 to its prompt_tokens {rec.prompt_tokens} (got "
                                  f"{rec.cached_tokens!r})")
        chunks += rec.prompt_tokens // chunk
        if chunks > MAX_PROMPT_CHUNKS:
            raise SimulationError(f"{where}: more than {MAX_PROMPT_CHUNKS:,} full chunks of "
                                  f"prompt by requests[{n}]; a fit holds at most "
                                  f"{MAX_PROMPT_CHUNKS:,}")
        if rec.tier is not None and rec.tier not in TIER_NAMES:
            raise SimulationError(f"{where}: requests[{n}].tier {rec.tier!r} is not one of "
                                  f"{', '.join(TIER_NAMES)}")
        if rec.ttft_s <= 0 or rec.total_s < rec.ttft_s or rec.prompt_tokens < 1 \
                or rec.output_tokens < 1:
            raise SimulationError(f"{where}: requests[{n}] needs ttft_s > 0, total_s >= ttft_s "
                                  "and positive token counts")
        records.append(rec)
    return BenchFile(data.get("model"), data.get("instance"), data.get("tp"), chunk,
                     data.get("kv_cache"), records, copies)


def _outcome(rec: BenchRecord, kv_cache: str | None, chunk: int) -> tuple[str, int]:
    if not rec.hit:
        return ("gpu", 0)
    tier = rec.tier or ("gpu" if kv_cache in (None, "off", "none") else "cpu")
    cached = rec.cached_tokens if rec.cached_tokens is not None \
        else (rec.prompt_tokens // chunk) * chunk
    return (tier, min(cached, rec.prompt_tokens - 1))


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


def _loss(dep: Deployment, bench: BenchFile, coeff: Coefficients) -> float:
    ttft, decode = replay(dep, bench, coeff)
    total = 0.0
    for rec, t, d in zip(bench.records, ttft, decode, strict=True):
        if rec.hit is None:  # replayed as a miss, which it may not have been: no evidence
            continue
        total += math.log(max(t, 1e-9) / rec.ttft_s) ** 2
        measured_decode = rec.total_s - rec.ttft_s
        if rec.output_tokens > 1 and measured_decode > 0:
            total += math.log(max(d, 1e-9) / measured_decode) ** 2
    return total


def ttft_error(dep: Deployment, bench: BenchFile, coeff: Coefficients) -> float:
    """Mean absolute relative error of the predicted TTFTs (of requests whose cache outcome
    the file knows)."""
    ttft, _ = replay(dep, bench, coeff)
    errs = [abs(t - r.ttft_s) / r.ttft_s for r, t in zip(bench.records, ttft, strict=True)
            if r.hit is not None]
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
        max_evaluations: int = 1500,
        progress: Callable[[int, int], None] | None = None) -> Fit:
    """Coefficients that best explain ``bench`` on ``dep`` (Nelder-Mead in log space).

    ``progress(done, at_most)`` is called after each replay of the bench (one evaluation).
    """
    if bench.chunk_size != dep.chunk_size:
        raise SimulationError(f"the bench ran with chunk_size {bench.chunk_size} but the "
                              f"deployment uses {dep.chunk_size}")
    for name, value in (("model", dep.model_id), ("instance", dep.instance_type)):
        given = getattr(bench, name)
        if given and given.lower() != value.lower():
            raise SimulationError(f"the bench file was measured on {name} {given!r}, not "
                                  f"{value!r}; calibrate with a matching --model/--instance")
    unknown = sum(r.hit is None for r in bench.records)
    if unknown == len(bench.records):
        raise SimulationError("no request in the bench file says whether it hit the cache "
                              "(every 'hit' is null); write it with lmikit bench --output "
                              "from the deployment's spec, which labels each request")
    base = start or dep.engine.coeff
    tiers = {_outcome(r, bench.kv_cache, bench.chunk_size)[0] for r in bench.records if r.hit}
    names = [n for n, tier in FITTED.items() if tier is None or tier in tiers]
    notes = [f"{n} kept at {getattr(base, n)}: the bench has no {tier} hits"
             for n, tier in FITTED.items() if n not in names]
    if unknown:
        notes.append(f"{unknown} request(s) with an unknown cache outcome ('hit': null) are "
                     "replayed as load (as misses) but left out of the fit")
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
        value = _loss(dep, bench, coeff_at(x)) + sum(
            v * v for name, v in zip(names, x, strict=True) if name in BOUNDED and v > 0)
        evaluations += 1
        if progress is not None:
            progress(evaluations, max_evaluations)
        return value

    best_x = [math.log(getattr(base, n)) for n in names]
    for step in (0.3, 0.1, 0.03):  # restarts from the best point shake off a stalled simplex
        best_x = _nelder_mead(loss, best_x, max_evaluations // 3, step)
    coeff = coeff_at(best_x)
    notes += [f"{n} reached its bound 1.0: the bench is faster than {dep.instance_type}'s "
              f"catalog figures allow for {dep.model_id}; check that it was measured on "
              "this model and instance type" for n in names
              if n in BOUNDED and getattr(coeff, n) >= 1.0 - 1e-9]
    return Fit(coeff, names, ttft_error(dep, bench, base), ttft_error(dep, bench, coeff),
               len(bench.records), notes)


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
                      routing: str) -> list[tuple[str | None, int]]:
    """Where each measured request of ``workload`` on ``dep`` should find its prompt cached:
    (the tier serving most of its cached tokens, or None for a miss; cached tokens), in the
    workload's order. ``lmikit bench`` writes these for its query round, since a client
    cannot see which tier answered: which one does is a matter of capacities (the plan's GPU
    pool and LMCache tiers), LRU order and routing, which this runs; timing hardly moves it.
    """
    out = run(workload, dep.copies(mode), dep.router(routing, random.Random(0)),
              random.Random(1))
    return [_served_most(out, r.id)
            for p in workload.phases if p.measured for s in p.sessions for r in s]


def _served_most(out: RunResult, request_id: int) -> tuple[str | None, int]:
    """(the tier that served most of a request's cached tokens, or None; cached tokens)."""
    cached = {t: v[request_id] for t, v in out.served.items() if v[request_id]}
    return (max(cached, key=lambda t: cached[t]) if cached else None), sum(cached.values())


def synthetic_bench(dep: Deployment, workload: Workload, mode: str) -> BenchFile:
    """A bench file as ``dep`` (with its coefficients) would produce it: for tests."""
    from lmikit.sim.routers import StickySession

    out = run(workload, dep.copies(mode), StickySession())
    records = []
    for p in workload.phases:
        for s in p.sessions:
            for r in s:
                tier, cached = _served_most(out, r.id)
                records.append(BenchRecord(
                    p.name, out.arrival[r.id], out.ttft[r.id] - out.arrival[r.id],
                    out.end[r.id] - out.arrival[r.id], r.prompt_tokens, r.output_tokens,
                    hit=tier is not None, tier=tier, cached_tokens=cached or None))
    return BenchFile(dep.model_id, dep.instance_type, dep.tp, dep.chunk_size, mode, records,
                     dep.instances)
