"""Fit the simulator's coefficients to a ``lmikit bench`` result file.

The bench file (:mod:`lmikit.sim`, written by ``lmikit bench --output``) lists every
request: when it started, its TTFT and end, prompt and output tokens, and, where known,
whether it hit the cache, from which tier and how many tokens were cached. Calibration
replays those requests at their recorded start times through the event loop, with each
request's cache outcome taken from the file, and searches the coefficients that explain the
measured TTFTs (the TTFT coefficients) and decode times (decode_hbm_efficiency) best, each
group fitted to its own measurements (least squares on log ratios; rounds of a coordinate
search and Nelder-Mead, :func:`lmikit.sim._search.search`); a group whose fit predicts its
measurements no better than the defaults is not applied.
Only coefficients the file has evidence for are fitted: retrieve efficiency needs CPU hits,
disk efficiency disk hits, remote bandwidth remote hits (the remote round trip is kept). A
request served by several tiers (part from the GPU pool, part from LMCache) is priced tier by
tier (``cached_by_tier``). The replay runs on as many model
copies as served the bench (``copies``, which ``lmikit bench`` reads from the endpoint), not on
the deployment being simulated: four requests in flight queue on one copy, not on eight.

>>> from lmikit.sim import deployment
>>> from lmikit.sim import long_doc_qa
>>> d = deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
>>> truth = Coefficients(prefill_mfu=0.45)
>>> bench = synthetic_bench(d.with_coefficients(truth), long_doc_qa(8, 4000, 16, 2), "cpu")
>>> round(fit(d, bench).coefficients.prefill_mfu, 2)
0.45
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lmikit.errors import SimulationError, safe_repr
from lmikit.sim._bench_format import (  # re-exported: the file format's names were first here
    FORMAT,
    MAX_BENCH_BYTES,
    MAX_BENCH_COPIES,
    MAX_BENCH_REQUESTS,
    MAX_BENCH_SECONDS,
    MODE_TIERS,
    TIER_NAMES,
    BenchFile,
    BenchRecord,
    bench_from_dict,
    capped,
    load_bench,
    measured_outcome,
    outcome_fields,
)
from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import remote_read_gbps
from lmikit.sim._loop import RunResult, run
from lmikit.sim._routers import LeastOutstanding
from lmikit.sim._search import search
from lmikit.sim._workloads import Phase, Request, Workload

__all__ = ["FORMAT", "MAX_BENCH_BYTES", "MAX_BENCH_COPIES", "MAX_BENCH_REQUESTS",
           "MAX_BENCH_SECONDS", "MODE_TIERS", "TIER_NAMES", "BenchFile", "BenchRecord", "Fit",
           "bench_from_dict", "capped", "decode_error", "evidence_mask", "expected_outcomes", "fit",
           "load_bench", "measured_outcome", "outcome_fields", "replay", "replay_workload",
           "served_by_tier", "synthetic_bench", "ttft_error"]

if TYPE_CHECKING:
    from lmikit.sim._scenario import Deployment

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
DECODE = "decode_hbm_efficiency"
# rounds of (TTFT stage, decode stage), each stage's share of the fit's replays; rounds end
# once one moves no coefficient by more than ROUND_SETTLED
STAGE_SHARES = ((0.3, 0.1), (0.3, 0.1), (0.15, 0.05))
ROUND_SETTLED = 0.005
# replays a fit may take (benchmarks/simulate_limits.py times a 1,000-request file's); a fit
# stops sooner when a round of its search gains under 2%
MAX_EVALUATIONS = 1500
# and at most this long in all (a 5,000-request bench of 120,000-token prompts replays in
# about 3 s: 1,500 replays would take 78 minutes); the replays besides the search's (the
# errors before and after, the checks at a bound) are counted in EXTRA_REPLAYS
MAX_FIT_SECONDS = 600.0
EXTRA_REPLAYS = 8
PAST_BOUND = 1.05  # where a fit at the bound looks whether the bench wants more
# what a coefficient needs to be fitted (_with_evidence): requests that carry it, and, for
# request_overhead_s, prefill lengths this far apart
MIN_EVIDENCE = 3
SEPARATING_RATIO = 2.0


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


def evidence_mask(bench: BenchFile) -> list[bool]:
    """Which requests' times are evidence for the fit: those whose cache outcome is known
    (where the file has measured outcomes, only the measured ones), and the tier of a hit
    too wherever a tier besides the GPU pool could have served it. The rest are replayed
    as load only."""
    measured = any(r.outcome_source == "measured" for r in bench.records)
    return [r.hit is not None and r.excluded is None
            and not (measured and r.outcome_source != "measured")
            and not (r.hit and r.tier is None and r.cached_by_tier is None
                     and bench.kv_cache != "off")
            for r in bench.records]


def _left_out(bench: BenchFile, mask: list[bool]) -> list[str]:
    """Notes on the requests ``mask`` leaves out of the fit, and on predicted outcomes."""
    recs = bench.records
    measured = any(r.outcome_source == "measured" for r in recs)
    out = [f"{n} request(s) the bench marked as no evidence are replayed as load but left out "
           f"of the fit: {why}" for why, n in Counter(
               r.excluded for r in recs if r.excluded is not None).items()]
    unknown = sum(r.hit is None for r in recs)
    if unknown:
        out.append(f"{unknown} request(s) with an unknown cache outcome ('hit': null) are "
                   "replayed as load (as misses) but left out of the fit")
    predicted = sum(r.hit is not None and r.outcome_source != "measured" for r in recs)
    if measured and predicted:
        out.append(f"{predicted} request(s) whose cache outcome is predicted, not measured, "
                   "are replayed as load but left out of the fit: it rests on the measured "
                   "ones")
    no_tier = sum(r.excluded is None and not ok and bool(r.hit) and r.tier is None
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


def _identity_problems(dep: Deployment, bench: BenchFile) -> list[str]:
    """Why ``bench`` may not have been measured on ``dep``: each field of what it ran on
    that the file leaves unknown or that differs from ``dep``'s."""
    problems = []
    unknown = [name for name in ("model", "instance", "tp", "kv_cache")
               if getattr(bench, name) is None]
    if unknown:
        problems.append(f"the bench file does not say which {', '.join(unknown)} it was "
                        "measured with (lmikit bench records them from the spec, or from the "
                        "endpoint where it can describe it)")
    for name, value in (("model", dep.model_id), ("instance", dep.instance_type),
                        ("tp", dep.tp)):
        given = getattr(bench, name)
        if given is not None and str(given).lower() != str(value).lower():
            problems.append(f"the bench file was measured with {name} {safe_repr(given)}, "
                            f"not {safe_repr(value)}")
    if bench.adapter is not None:
        problems.append(f"the bench file was measured through adapter "
                        f"{safe_repr(bench.adapter)}, not the base model (LoRA adds work to "
                        "every step)")
    return problems


def _with_evidence(bench: BenchFile, mask: list[bool]) -> tuple[list[str], dict[str, str]]:
    """The coefficients ``bench`` has the evidence to fit, and why each other is held.

    Each needs MIN_EVIDENCE requests that carry it (of those ``mask`` keeps): prefill_mfu
    requests that prefilled a chunk or more; request_overhead_s requests whose prefills
    differ at least SEPARATING_RATIO-fold in length (one prefill length cannot tell a
    fixed cost from a per-token one); decode_hbm_efficiency requests with two or more
    output tokens and time after the first; a tier's coefficient requests that read a chunk
    or more from that tier. The TTFT coefficients together need two requests more than
    there are of them, so a fit leaves a residual to judge it by: past that, the tiers'
    are held first, then request_overhead_s.
    """
    rows = [r for r, ok in zip(bench.records, mask, strict=True) if ok]
    chunk = bench.chunk_size
    served = [dict(_outcome(r, bench.kv_cache, chunk)) for r in rows]
    prefilled = [r.prompt_tokens - sum(s.values()) for r, s in zip(rows, served, strict=True)]
    spread = max(prefilled) / max(1, min(prefilled)) if prefilled else 1.0
    have = {"prefill_mfu": sum(p >= chunk for p in prefilled),
            "request_overhead_s": len(rows),
            "decode_hbm_efficiency": sum(r.output_tokens > 1 and r.total_s > r.ttft_s
                                         for r in rows)}
    need = {"prefill_mfu": f"requests that prefilled {chunk:,} tokens or more",
            "request_overhead_s": "requests",
            "decode_hbm_efficiency": "requests with two or more output tokens"}
    for name, tier in FITTED.items():
        if tier is not None:
            have[name] = sum(s.get(tier, 0) >= chunk for s in served)
            need[name] = f"requests that read {chunk:,} tokens or more from the {tier} tier"
    held = {n: f"the bench has {have[n]:,} {need[n]}; a fit needs {MIN_EVIDENCE}"
            for n in FITTED if have[n] < MIN_EVIDENCE}
    if "request_overhead_s" not in held and spread < SEPARATING_RATIO:
        held["request_overhead_s"] = (
            f"the requests' prefill lengths span only {spread:.3g}-fold, which cannot tell a "
            f"fixed cost from a per-token one (a fit needs {SEPARATING_RATIO:g}-fold: short "
            "prompts beside long ones, as the two lmikit bench sends first)")
    names = [n for n in FITTED if n not in held]
    ttft_names = [n for n in names if n != "decode_hbm_efficiency"]
    while ttft_names and len(rows) < len(ttft_names) + 2:
        name = ttft_names.pop()  # the tiers' first, then request_overhead_s
        names.remove(name)
        held[name] = (f"{len(rows)} requests are evidence, too few to fit "
                      f"{len(ttft_names) + 1} TTFT coefficients (a fit needs two requests "
                      "more than the coefficients it fits)")
    return names, held


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


def _losses(dep: Deployment, bench: BenchFile, coeff: Coefficients,
            mask: list[bool]) -> tuple[float, float]:
    """Sums of squared log ratios, predicted over measured: of the TTFTs, and of the decode
    times (of requests with two or more output tokens), over the requests ``mask`` keeps."""
    ttft, decode = replay(dep, bench, coeff)
    first = after = 0.0
    for rec, t, d, ok in zip(bench.records, ttft, decode, mask, strict=True):
        if not ok:  # replayed as load: its outcome is not known well enough to be evidence
            continue
        first += math.log(max(t, 1e-9) / rec.ttft_s) ** 2
        measured_decode = rec.total_s - rec.ttft_s
        if rec.output_tokens > 1 and measured_decode > 0:
            after += math.log(max(d, 1e-9) / measured_decode) ** 2
    return first, after


def ttft_error(dep: Deployment, bench: BenchFile, coeff: Coefficients,
               mask: list[bool] | None = None) -> float:
    """Mean absolute relative error of the predicted TTFTs (of the requests that are
    evidence, :func:`evidence_mask`)."""
    return _errors(dep, bench, coeff, evidence_mask(bench) if mask is None else mask)[0]


def decode_error(dep: Deployment, bench: BenchFile, coeff: Coefficients,
                 mask: list[bool] | None = None) -> float:
    """Mean absolute relative error of the predicted decode times (time after the first
    token) of the requests that are evidence and had two or more output tokens; 0 where
    none had."""
    return _errors(dep, bench, coeff, evidence_mask(bench) if mask is None else mask)[1]


def _errors(dep: Deployment, bench: BenchFile, coeff: Coefficients,
            mask: list[bool]) -> tuple[float, float]:
    """(:func:`ttft_error`, :func:`decode_error`) from one replay."""
    ttft, decode = replay(dep, bench, coeff)
    first = [abs(t - r.ttft_s) / r.ttft_s
             for r, t, ok in zip(bench.records, ttft, mask, strict=True) if ok]
    after = [abs(d - (r.total_s - r.ttft_s)) / (r.total_s - r.ttft_s)
             for r, d, ok in zip(bench.records, decode, mask, strict=True)
             if ok and r.output_tokens > 1 and r.total_s > r.ttft_s]
    return sum(first) / len(first), sum(after) / len(after) if after else 0.0


@dataclass(frozen=True)
class Fit:
    coefficients: Coefficients
    fitted: list[str]
    ttft_error_before: float
    ttft_error_after: float
    requests: int
    notes: list[str] = field(default_factory=list)
    decode_error_before: float = 0.0
    decode_error_after: float = 0.0
    in_file: int = 0  # the file's requests; ``requests`` counts those that were evidence

    def summary(self) -> list[str]:
        """What the CLI prints: the TTFT and decode-time errors before and after the fit,
        then each note."""
        errors = (f"TTFT error {self.ttft_error_before:.1%} -> {self.ttft_error_after:.1%}, "
                  f"decode time error {self.decode_error_before:.1%} -> "
                  f"{self.decode_error_after:.1%}")
        applied = f"fitted {', '.join(self.fitted)}" if self.fitted else \
            "no fit did better than the defaults: none applied"
        of = f" (of the file's {self.in_file})" if self.in_file > self.requests else ""
        return [f"Calibrated on {self.requests} measured requests{of}: {errors} ({applied})",
                *(f"  - {n}" for n in self.notes)]

    def to_dict(self) -> dict[str, Any]:
        # six significant figures, not decimals: tokenize_s_per_token is ~2e-6
        return {"coefficients": {k: float(f"{v:.6g}") if isinstance(v, float) else v
                                 for k, v in self.coefficients.to_dict().items()},
                "fitted": self.fitted, "ttft_error_before": round(self.ttft_error_before, 4),
                "ttft_error_after": round(self.ttft_error_after, 4),
                "decode_error_before": round(self.decode_error_before, 4),
                "decode_error_after": round(self.decode_error_after, 4),
                "requests": self.requests, "requests_in_file": self.in_file or self.requests,
                "notes": self.notes}


def fit(dep: Deployment, bench: BenchFile, start: Coefficients | None = None,
        max_evaluations: int = MAX_EVALUATIONS,
        progress: Callable[[int, int], None] | None = None,
        unverified: bool = False, max_seconds: float = MAX_FIT_SECONDS) -> Fit:
    """Coefficients that best explain ``bench`` on ``dep`` (in log space: rounds of a
    coordinate search and Nelder-Mead, :func:`lmikit.sim._search.search`).

    ``progress(done, at_most)`` is called after each replay of the bench (one evaluation).
    The replays are bounded in number (``max_evaluations``) and in time: a fit times its
    first replay and takes no more than fit in ``max_seconds`` (with a note saying so).
    A bench whose model, instance type, TP, kv_cache mode or adapter is unknown or not
    ``dep``'s is refused; ``unverified`` fits it anyway, with a note naming each field.
    """
    if bench.chunk_size != dep.chunk_size:
        raise SimulationError(f"the bench ran with chunk_size {bench.chunk_size} but the "
                              f"deployment uses {dep.chunk_size}")
    notes: list[str] = []
    if problems := _identity_problems(dep, bench):
        if not unverified:
            raise SimulationError(
                f"{'; '.join(problems)}. A fit is evidence only for the deployment it was "
                "measured on: calibrate one that matches the file (the spec it was measured "
                "with, or --model/--instance/--tp), or pass --calibrate-anyway to fit it "
                "regardless")
        notes += [f"fitted regardless (--calibrate-anyway): {p}" for p in problems]
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
    names, held = _with_evidence(bench, mask)
    tiers = MODE_TIERS.get(bench.kv_cache or "", TIER_NAMES)  # no word on tiers it lacks
    if not names:
        raise SimulationError("the bench file has too little evidence to fit any "
                              "coefficient: " + "; ".join(
                                  f"{n}: {why}" for n, why in held.items()
                                  if FITTED[n] is None or FITTED[n] in tiers))
    notes += [f"{n} kept at {getattr(base, n):g}: {why}" for n, why in held.items()
              if FITTED[n] is None or FITTED[n] in tiers]
    notes += _left_out(bench, mask)
    if bench.stopped is not None:
        notes.append(f"the bench stopped before its last request ({bench.stopped}); fitted "
                     f"to the {len(bench.records)} it measured")
    if bench.copies is None and dep.instances > 1:
        notes.append(f"the bench file does not say how many model copies served it; replayed "
                     f"on {dep.instances}, the deployment's (lmikit bench records it)")

    ttft_names = [n for n in names if n != DECODE]
    decode_names = [n for n in names if n == DECODE]
    measured: dict[Coefficients, tuple[float, float]] = {}

    def errors(c: Coefficients) -> tuple[float, float]:
        if c not in measured:
            measured[c] = _errors(dep, bench, c, mask)
        return measured[c]

    began = time.perf_counter()
    errors(base)
    one = time.perf_counter() - began  # what a replay of this bench costs here
    fits_in = int(max_seconds / max(one, 1e-9)) - EXTRA_REPLAYS
    if fits_in < max_evaluations:
        notes.append(f"a replay of this bench takes {one:.2g} s, so the fit stopped at "
                     f"{max(1, fits_in):,} replays (not {max_evaluations:,}) to stay within "
                     f"{max_seconds:g} s: its coefficients may fall short of the best fit")
        max_evaluations = max(1, fits_in)
    evaluations = 0

    def stage(stage_names: list[str], which: int, coeff: Coefficients,
              share: float) -> Coefficients:
        """``coeff`` with ``stage_names`` fitted to the TTFTs (``which`` 0) or the decode
        times (1) alone, in at most ``share`` of the budget."""
        def coeff_at(x: list[float]) -> Coefficients:
            values = {}
            for name, v in zip(stage_names, x, strict=True):
                value = math.exp(v)
                values[name] = min(value, 1.0) if name in BOUNDED else value
            return coeff.replace(**values)

        def loss(x: list[float]) -> float:
            nonlocal evaluations
            # past a bound of 1.0 the coefficient is held at 1.0; the penalty keeps the
            # simplex from wandering on that plateau and leads it back to the bound
            value = _losses(dep, bench, coeff_at(x), mask)[which] + sum(
                v * v for name, v in zip(stage_names, x, strict=True)
                if name in BOUNDED and v > 0)
            evaluations += 1
            if progress is not None:
                progress(evaluations, max_evaluations)
            return value

        budget = min(round(share * max_evaluations), max_evaluations - evaluations)
        if not stage_names or budget < 1:
            return coeff
        # a bounded coefficient starts inside its bound (disk_read_efficiency's default is
        # the bound itself): a simplex started there has half its points on the plateau
        x0 = [math.log(min(getattr(coeff, n), START_BELOW_BOUND) if n in BOUNDED
                       else getattr(coeff, n)) for n in stage_names]
        return coeff_at(search(loss, x0, budget))

    # TTFT and decode time are fitted apart: a decode the model cannot match (faster than
    # the HBM bound, or slowed by something it does not model) must not be paid for with
    # TTFT coefficients. They still meet in the replay (a prefill queues behind decode
    # steps, a decode step carries prefill chunks), so each round refits both with the
    # other's latest fit in place, until a round moves none of them.
    coeff = base
    for shares in STAGE_SHARES:
        last = coeff
        coeff = stage(ttft_names, 0, coeff, shares[0])
        coeff = stage(decode_names, 1, coeff, shares[1])
        if last is not base and all(abs(getattr(coeff, n) / getattr(last, n) - 1)
                                    <= ROUND_SETTLED for n in names):
            break
    coeff, kept = _no_worse(errors, base, coeff, ttft_names, decode_names)
    fitted = [n for n in names if n not in kept]
    notes += kept.values()
    # at its bound, a coefficient says the bench is faster than the hardware allows only if
    # going past the bound would explain the bench better; a bench that sits on the bound
    # (the catalog's figure, reached) is no such sign
    pinned = [n for n in fitted if n in BOUNDED and getattr(coeff, n) >= 1.0 - 1e-9]
    at_bound = _losses(dep, bench, coeff, mask) if pinned else (0.0, 0.0)
    notes += [f"{n} reached its bound 1.0: the bench is faster than {dep.instance_type}'s "
              f"catalog figures allow for {dep.model_id}; check that it was measured on "
              "this model and instance type" for n in pinned
              if _losses(_faster(dep, n), bench, coeff, mask)[n == DECODE]
              < 0.99 * at_bound[n == DECODE]]
    network = dep.engine.network_gbps
    if "remote_gbps" in fitted and remote_read_gbps(coeff.remote_gbps, network) < coeff.remote_gbps:
        # a remote read is no faster than the instance's network (EngineModel.
        # remote_read_gbps): past it every remote_gbps predicts the same, so the fit says so
        # and keeps the rate that was seen
        notes.append(f"remote_gbps fitted past {dep.instance_type}'s {network:g} GB/s network, "
                     f"which caps a remote read: set to {network:g} (the remote hits ran at "
                     "the network's rate; the store itself may be faster)")
        coeff = coeff.replace(remote_gbps=network)
    (ttft_before, decode_before), (ttft_after, decode_after) = errors(base), errors(coeff)
    if decode_after > decode_before:  # the TTFT fit's prefill share of decode steps moved it
        notes.append(f"the decode time error rose from {decode_before:.1%} to "
                     f"{decode_after:.1%} with the fitted TTFT coefficients: no "
                     "decode_hbm_efficiency explains this bench's decode times")
    return Fit(coeff, fitted, ttft_before, ttft_after, sum(mask), notes,
               decode_before, decode_after, len(bench.records))


def _no_worse(errors: Callable[[Coefficients], tuple[float, float]], base: Coefficients,
              coeff: Coefficients, ttft_names: list[str], decode_names: list[str]
              ) -> tuple[Coefficients, dict[str, str]]:
    """``coeff`` with each group of fitted coefficients (TTFT's, decode's) put back to
    ``base`` where it does not predict its measurements better than ``base`` does
    (``errors``: the TTFT and decode time errors of a set of coefficients); and a note for
    each coefficient put back."""
    kept: dict[str, str] = {}
    for names, which, what in ((ttft_names, 0, "TTFT"), (decode_names, 1, "decode time")):
        if not names:
            continue
        before, after = errors(base)[which], errors(coeff)[which]
        if after < before:
            continue
        for n in names:
            kept[n] = (f"{n} kept at {getattr(base, n):g}: its fit ({getattr(coeff, n):.3g}) "
                       f"did not lower the {what} error ({before:.1%} with the defaults, "
                       f"{after:.1%} fitted), so it is not applied")
        coeff = coeff.replace(**{n: getattr(base, n) for n in names})
    return coeff, kept


def _faster(dep: Deployment, name: str) -> Deployment:
    """``dep`` with the catalog figure behind bounded coefficient ``name`` 5% higher: the
    coefficient past its bound of 1.0, which it cannot be set to."""
    figure = BOUNDED[name]
    return replace(dep, engine=replace(dep.engine, **{
        figure: getattr(dep.engine, figure) * PAST_BOUND}))


def expected_outcomes(dep: Deployment, workload: Workload, mode: str,
                      routing: str) -> list[dict[str, int]]:
    """Where each measured request of ``workload`` on ``dep`` should find its prompt cached:
    its cached tokens per tier (``{"gpu": 3328, "cpu": 512}``; empty for a miss), in the
    workload's order. ``lmikit bench`` writes these for its query round where the server
    does not count each request's cached tokens (LMI does not), and splits a count across
    tiers by them where it does (a client never sees which tier answered): which one does is
    a matter of capacities (the plan's GPU pool and LMCache tiers), LRU order and routing,
    which this runs. Timing moves it too: with several copies routed by least outstanding
    requests, which copy serves a repeat depends on when the others finish.
    """
    out = run(workload, dep.copies(mode), dep.router(routing, random.Random(0)),
              random.Random(1))
    return [served_by_tier(out, r.id)
            for p in workload.phases if p.measured for s in p.sessions for r in s]


def served_by_tier(out: RunResult, request_id: int) -> dict[str, int]:
    """A request's cached tokens per tier that served any, in tier order."""
    return {t: out.served[t][request_id] for t in TIER_NAMES
            if t in out.served and out.served[t][request_id]}


def synthetic_bench(dep: Deployment, workload: Workload, mode: str) -> BenchFile:
    """A bench file as ``dep`` (with its coefficients) would produce it: for tests."""
    from lmikit.sim._routers import StickySession

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
