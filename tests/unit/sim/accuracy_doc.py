"""``docs/accuracy.md``, rendered from the accuracy record (``accuracy.py``).

:data:`REVIEW` is every modelling choice the table's replays make beyond the simulator's
own rules, how it is classed and what became of it: S (the publication states it), D (the
setup's source code implies it), A (an assumption, neither, made the same way for any
source), F (inferred from the figures themselves: fitting). F choices are fitted choices
now (``variant.CHOICES``), re-decided without their source out of sample.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from tests.unit.sim.accuracy import (
    BEFORE,
    GRID,
    RECORD,
    WITHIN,
    Cell,
    Report,
    cells,
    error,
    load_before,
    report,
    scored,
)
from tests.unit.sim.published import PUBLICATIONS, ROWS, UNITS
from tests.unit.sim.rows import Row
from tests.unit.sim.variant import CHOICES, DEFAULT, Variant

# (choice, class, what became of it)
REVIEW: tuple[tuple[str, str, str], ...] = (
    ("`tp_decode_step_overhead_s` (0.004 s shipped)", "F",
     "fitted: global grid 0.002-0.006 s"),
    ("NVLink all-reduces not costed (shipped)", "F",
     "fitted: global grid, not costed or at NCCL's 370 GB/s"),
    ("llm-d 2025: the gateway's limit of 1,024 in flight", "D (limit not stated)",
     "fitted choice `llmd_2025_gateway`, default Envoy's 1,024"),
    ("llm-d 2026 runs on the 73-capacity report's pool", "F",
     "fitted choice `llmd_2026_pool`, default the planner's pool"),
    ("llm-d code generation routed per request", "F",
     "fitted choice `codegen_routing`, default per connection (the client's source)"),
    ("llm-d 2025 summaries: ladder + warm-up (73), ladder (37)", "S",
     "kept: each report's own per-stage rows add up to its summary that way"),
    ("llm-d 2025 pools per pod (307,328; 461,376)", "S", "kept"),
    ("64-token blocks (precise scorer's blockSize), vLLM's H100 defaults", "S/D", "kept"),
    ("random ids re-encoded: 1.052 (Qwen), 1.043 (Llama 3) tokens per id", "D", "kept"),
    ("2025 vLLM admits a request once its next chunk fits", "A (by date)", "kept"),
    ("approximate scorer: 4 characters per token", "A", "kept (any value above 2.7 routes "
     "the same)"),
    ("picker metrics every 50 ms; queue scorer reads vLLM's waiting count", "D", "kept"),
    ("HyperPod: 100 concurrent users", "S", "kept (the article's one client per 100 "
     "concurrent requests; the earlier 56 users with 5 s think time were dropped)"),
    ("HyperPod: 8-turn chat to 8K / 64K, 100 out, no think time, 2 sessions a user", "A",
     "kept"),
    ("HyperPod: improved = KV-aware + remote tier, baseline = random + off", "A", "kept"),
    ("HyperPod: the L2 tier is LMCache's `sagemaker-hyperpod` connector: two lease "
     "requests per chunk looked up and read, 100 reads at once", "D (LMCache 0.5.6 source)",
     "kept (`lmikit.sim`)"),
    ("HyperPod: the daemon's round trip 0.2 ms and read rate 2 GB/s (Redis's figures)", "A",
     "kept (AWS publishes none)"),
    ("LMI: the NVMe run keeps LMCache's 5 GB CPU tier", "D (LMCache default)", "kept"),
    ("GKE: groups from the stated total-cache ranges", "S (derived)", "kept"),
    ("GKE: 2,048-token step budget, 128 / 640 GB per worker", "S (linked config)", "kept"),
    ("GKE: LMCache v0.3.3 does not write disk hits back to CPU", "D", "kept"),
    ("GKE: Llama-3.1 for 3.3, p5.48xlarge for A3 mega, catalog NVMe rate", "A", "kept"),
    ("GKE: Test 2's 1k row left out (its ratios are 1 by definition)", "S", "kept"),
    ("llm-d offload: 2,700 requests (inference-perf #320)", "A", "kept"),
    ("llm-d offload: one picker for every row, GPU + CPU scorers as one", "D/A", "kept"),
    ("llm-d offload: the guide's pool (9,271 blocks)", "S", "kept"),
    ("b2b-saas Service: per keep-alive connection, 64 workers, 5 s keep-alive", "D", "kept"),
    ("2026 vLLM reserves the whole prompt (0.19.1 for code generation, reasoning)",
     "S / A (b2b-saas)", "kept"),
    ("code generation: 64-token blocks, timed-out requests served, slots independent",
     "A", "kept"),
    ("reasoning: keep-alive routing per worker, 600 s timeout iteration", "D", "kept"),
    ("random routing and Services: median of 7 seeds", "method", "kept"),
    ("calibration recipe: token-id prompts skip tokenization", "D", "kept"),
    ("LMCache long_doc_qa page: p4de (A100 80GB) as LMI's run, vLLM before 0.19", "A",
     "new source: not fitted"),
    ("llm-d storage: Lustre 1,000 MBps/TiB x 18,000 GiB, split over 4 engines",
     "S (StorageClass) / A (split)", "new source: not fitted"),
    ("llm-d storage: the CPU guide's picker, re-encoded prompts, vLLM before 0.19",
     "S / D / A", "new source: not fitted"),
    ("GPUStack: RTX 4090 from NVIDIA's Ada whitepaper, PCIe Gen4 host at 25 GB/s",
     "S / A", "new source: not fitted"),
    ("GPUStack: vLLM 0.10.1.1's defaults under 70 GiB (2,048 tokens, 256 sequences)", "D",
     "new source: not fitted"),
)

PLANNER_DOC = RECORD.parents[4] / "docs" / "planner.md"
# the same table for the installed package (``lmikit.advise``'s trust statement reads it)
PACKAGE_TABLE = RECORD.parents[4] / "sdk" / "lmikit" / "sim" / "accuracy.json"
BEGIN = ("<!-- accuracy summary: generated by `python -m tests.unit.sim.accuracy --doc`, "
         "checked by tests/unit/sim/test_accuracy.py -->")
END = "<!-- end of the accuracy summary -->"
QUANTITY_NAMES = {"ttft_hit": "TTFT on cache hits", "ttft_miss": "TTFT on misses / cold",
                  "throughput": "throughput", "total_time": "total time", "itl": "time per "
                  "output token", "all": "all"}


def factor(log_error: float) -> str:
    return f"{math.exp(log_error):.2f}x"


def describe(v: Variant) -> str:
    allreduce = ("NVLink all-reduces costed at " f"{v.nvlink_allreduce_gbps:g} GB/s"
                 if v.nvlink_allreduce_gbps else "NVLink all-reduces not costed")
    choices = "; ".join(f"`{k}` = {x}" for k, x in v.choices)
    return (f"`tp_decode_step_overhead_s` = {v.tp_step_overhead_s:g} s, {allreduce}"
            + (f"; {choices}" if choices else ""))


def _cells_table(sample: Mapping[tuple[str, str], Cell],
                 out: Mapping[tuple[str, str], Cell] | None) -> list[str]:
    head = "| category | quantity | setups | rows | median | worst | within 1.5x |"
    line = "|---|---|---|---|---|---|---|"
    if out is not None:
        head += " median (LOSO) | worst (LOSO) | within 1.5x (LOSO) |"
        line += "---|---|---|"
    lines = [head, line]
    for (category, quantity), c in sample.items():
        text = (f"| {category} | {QUANTITY_NAMES[quantity]} | {c.setups} | {c.rows} | "
                f"{factor(c.median)} | {factor(c.worst)} | {c.within:.0%} |")
        if out is not None:
            o = out[(category, quantity)]
            text += f" {factor(o.median)} | {factor(o.worst)} | {o.within:.0%} |"
        lines.append(text)
    return lines


def _setups_table(rep: Report) -> list[str]:
    lines = ["| setup | publications | categories | rows | in sample: median, worst | "
             "out of sample: median, worst | within 1.5x (in, out) |",
             "|---|---|---|---|---|---|---|"]
    for setup in dict.fromkeys(r.setup for r in ROWS):
        rows = [r for r in scored(ROWS) if r.setup == setup]
        if not rows:
            continue
        a = cells(rows, rep.in_sample_values)[("all", "all")]
        b = cells(rows, rep.out_of_sample)[("all", "all")]
        pubs = ", ".join(dict.fromkeys(r.publication for r in ROWS if r.setup == setup))
        cats = ", ".join(dict.fromkeys(r.category for r in rows))
        lines.append(f"| {setup} | {pubs} | {cats} | {len(rows)} | {factor(a.median)}, "
                     f"{factor(a.worst)} | {factor(b.median)}, {factor(b.worst)} | "
                     f"{a.within:.0%}, {b.within:.0%} |")
    return lines


def _before_after_table(rep: Report, samples: Sequence[str]) -> list[str]:
    """Per category and quantity, the error before LMCache's hit path was modelled
    (:data:`BEFORE`) and now, over the rows both have, for each of ``samples`` ("in",
    "out")."""
    before_in, before_out = load_before()
    rows = [r for r in ROWS if r.name in before_in]
    pairs = {"in": (before_in, rep.in_sample_values), "out": (before_out, rep.out_of_sample)}
    got = {s: (cells(rows, pairs[s][0]), cells(rows, pairs[s][1])) for s in samples}
    label = {"in": "in sample", "out": "LOSO"}
    head = "| category | quantity | setups |"
    line = "|---|---|---|"
    for s in samples:
        head += (f" median ({label[s]}) | worst ({label[s]}) | within 1.5x ({label[s]}) |")
        line += "---|---|---|"
    lines = [head, line]
    for key, c in got[samples[0]][0].items():
        text = f"| {key[0]} | {QUANTITY_NAMES[key[1]]} | {c.setups} |"
        for s in samples:
            b, a = got[s][0][key], got[s][1][key]
            text += (f" {factor(b.median)} -> {factor(a.median)} | {factor(b.worst)} -> "
                     f"{factor(a.worst)} | {b.within:.0%} -> {a.within:.0%} |")
        lines.append(text)
    return lines


BEFORE_AFTER = (
    "Before -> now: the same rows, predicted by the simulator before LMCache's hit and miss "
    "path was modelled from vLLM's and LMCache 0.5.6's source (the lookup before the step, "
    "hashing, the remote store's round trips per chunk, the store charged step by step) "
    "and now, each by the same fit and report (the earlier predictions are frozen in "
    f"`{BEFORE.relative_to(BEFORE.parents[4]).as_posix()}`).")


def _ratio(row: Row, value: float | None) -> str:
    if value is None:
        return "-"
    if row.quantity == "order":
        return "holds" if value == 1.0 else "fails"
    return f"{value / row.published:.2f}"


def _rows_table(rep: Report) -> list[str]:
    lines = ["| figure | quantity | category | setup | published | simulated | ratio | "
             "ratio (LOSO) |", "|---|---|---|---|---|---|---|---|"]
    for r in ROWS:
        sim = rep.in_sample_values[r.name]
        lines.append(f"| {r.name} | {r.quantity} | {r.category} | {r.setup} | "
                     f"{r.published:.4g} {r.unit} | {sim:.4g} {r.unit} | {_ratio(r, sim)} | "
                     f"{_ratio(r, rep.out_of_sample.get(r.name))} |")
    return lines


def counts(rows: Sequence[Row]) -> str:
    scored_rows = scored(rows)
    return (f"{len({r.publication for r in rows})} publications, "
            f"{len({r.setup for r in scored_rows})} independent setups, "
            f"{len(scored_rows)} rows with an error ratio")


def render(values: Mapping[str, Mapping[str, float]]) -> str:
    rep = report(values)
    new = [r for r in ROWS if PUBLICATIONS[r.publication].unseen]
    sample, out = cells(ROWS, rep.in_sample_values), cells(ROWS, rep.out_of_sample)
    outside = [r for r in scored(ROWS) if error(r, rep.out_of_sample[r.name]) > WITHIN]
    total = sum(1 for _ in scored(ROWS))
    text = [
        "# Simulator accuracy against published measurements",
        "",
        "<!-- Generated by `python -m tests.unit.sim.accuracy --doc` from "
        f"`{RECORD.relative_to(RECORD.parents[4]).as_posix()}`; `tests/unit/sim/test_accuracy.py` "
        "checks that this file is what the record gives. Do not edit by hand. -->",
        "",
        f"**What is measured**: {counts(ROWS)} ({len(ROWS) - total} more rows are orderings "
        "or the planner's KV pool against a published one). Out of sample, "
        f"{total - len(outside)} of the {total} rows are within 1.5x.",
        "",
        "A row's error is |log(simulated / published)|, shown below as a factor (1.25x: 25% "
        "off either way). Rows count by setup: within each group every independent setup "
        "(one workload on one fleet; a sweep's points, or two publications of one run, are "
        "one setup) weighs 1, shared by its rows, so the median and the share within 1.5x "
        "are over setups, not rows; the worst is the worst row. Rows, setups and their tags "
        "are in `tests/unit/sim/published.py` and the modules it lists; the fit and the "
        "leave-one-source-out procedure in `tests/unit/sim/accuracy.py`.",
        "",
        "- **In sample**: the fit over every row predicts every row.",
        "- **Out of sample (LOSO)**: each source (a publication, or publications sharing a "
        "run or setup) is predicted by the fit over the others, its own choices at their "
        "defaults.",
        "- **New sources**: sources added after the model was built, predicted by the fit "
        "over the sources before them.",
        "",
        "## The fit",
        "",
        f"Grid: {len(GRID)} global points; the shipped defaults are {describe(DEFAULT)}.",
        "",
        f"- In sample: {describe(rep.in_sample)}.",
    ]
    for unit in UNITS:
        text.append(f"- Without `{unit}`: {describe(rep.folds[unit])}.")
    text += [f"- Before the new sources: {describe(rep.unseen_fit)}.", "",
             "Fitted choices (each default is what its source or lmikit's general rule "
             "gives):", "",
             "| choice | source held out with | default | alternatives | what it is |",
             "|---|---|---|---|---|"]
    text += [f"| `{name}` | {c.unit} | {c.default} | {', '.join(c.alternatives)} | {c.why} |"
             for name, c in CHOICES.items()]
    text += ["", "## Error by category and quantity", ""]
    text += _cells_table(sample, out)
    text += ["", "## Before and after the hit path", "", BEFORE_AFTER, ""]
    text += _before_after_table(rep, ("in", "out"))
    text += ["", "## Sources added after the model was built", "",
             "Never in view when the simulator's coefficients or choices were set; "
             "predicted by the fit over the sources before them. LMCache's hit and miss "
             "path was modelled from vLLM's and LMCache's source after GPUStack's "
             "miss-overhead figures had been read (as a check: no number or rule was taken "
             "from them). Sources: "
             + "; ".join(p.title for p in PUBLICATIONS.values() if p.unseen)
             + f". {counts(new)}.", ""]
    text += _cells_table(cells(new, rep.unseen), None)
    text += ["", "## Error by setup", ""]
    text += _setups_table(rep)
    text += ["", "## Modelling choices", "",
             "Every choice the replays make beyond the simulator's own rules. S: the "
             "publication states it; D: the setup's source code implies it; A: an "
             "assumption, neither; F: inferred from the published figures (fitting).", "",
             "| choice | class | now |", "|---|---|---|"]
    text += [f"| {what} | {kind} | {now} |" for what, kind, now in REVIEW]
    text += ["", "## Every row", "",
             "Simulated and ratio: in sample; ratio (LOSO): with the row's source held "
             "out. Rows outside 1.5x are listed like the rest; docs/planner-model.md says what is "
             "known of why.", ""]
    text += _rows_table(rep)
    return "\n".join(text) + "\n"


def headline(rep: Report) -> str:
    total = len(scored(ROWS))
    inside = sum(1 for r in scored(ROWS) if error(r, rep.out_of_sample[r.name]) <= WITHIN)
    return (f"**What is measured**: {counts(ROWS)}. Out of sample (each source held out of "
            f"the fit that predicts it), {inside} of the {total} rows are within 1.5x.")


def planner_block(values: Mapping[str, Mapping[str, float]]) -> str:
    """The summary ``docs/planner.md`` carries between :data:`BEGIN` and :data:`END`."""
    rep = report(values)
    sample, out = cells(ROWS, rep.in_sample_values), cells(ROWS, rep.out_of_sample)
    lines = [BEGIN, "", headline(rep), "",
             "Error by category and quantity, in sample and out of sample (median over "
             "setups, worst row, setup-weighted share within 1.5x); the fit, the error of "
             "every setup and every row are in [accuracy.md](accuracy.md).", ""]
    lines += _cells_table(sample, out)
    lines += ["", BEFORE_AFTER + " Out of sample:", ""]
    lines += _before_after_table(rep, ("out",))
    return "\n".join([*lines, "", END])


def with_planner_block(text: str, values: Mapping[str, Mapping[str, float]]) -> str:
    """``text`` (docs/planner.md) with its summary block replaced."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + planner_block(values) + text[end:]


def package_table(values: Mapping[str, Mapping[str, float]]) -> str:
    """docs/accuracy.md's error by category and quantity, as :data:`PACKAGE_TABLE` holds it:
    per sample, category and quantity, the setups, rows, median and worst factor and the
    setup-weighted share within 1.5x."""
    rep = report(values)

    def table(got: Mapping[tuple[str, str], Cell]) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (category, quantity), c in got.items():
            out.setdefault(category, {})[quantity] = {
                "setups": c.setups, "rows": c.rows, "median": math.exp(c.median),
                "worst": math.exp(c.worst), "within": c.within}
        return out

    data = {"generated": "by `python -m tests.unit.sim.accuracy --doc` from "
                         f"`{RECORD.relative_to(RECORD.parents[4]).as_posix()}`; the table "
                         "'Error by category and quantity' of docs/accuracy.md. Do not edit "
                         "by hand.",
            "within": math.exp(WITHIN), "quantities": dict(QUANTITY_NAMES),
            "in_sample": table(cells(ROWS, rep.in_sample_values)),
            "out_of_sample": table(cells(ROWS, rep.out_of_sample))}
    return json.dumps(data, indent=1) + "\n"
