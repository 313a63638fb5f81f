"""The simulator's accuracy against published figures, in sample and out of sample.

Error of a row: |log(simulated / published)|. Rows count by setup, not one by one: within a
group of rows (a category x quantity cell, a training set), each setup weighs 1, shared
equally by its rows there, so the 48 stages of one replay count as much as one figure of
another setup.

The fit, over a training set of rows (small, deterministic, the same in and out of sample):

1. the global part: every point of :data:`GRID` (``tp_decode_step_overhead_s`` x whether
   NVLink all-reduces are costed), each choice at its default; keep the one with the least
   setup-weighted mean error (ties: the earlier point; the shipped defaults come first);
2. per-source choices (``variant.CHOICES``): for each held-in unit with choices, every
   combination of its alternatives at that point; keep the least error (ties: defaults).

In sample: fit on every row, predict every row. Out of sample (leave one source out): for
each unit of ``published.PUBLICATIONS``, fit on the others and predict it at the fitted
global point with its own choices at their defaults (a choice about a source cannot be fit
without it). Unseen: fit on the rows published before this version's new sources, predict
those. Simulating every point takes a while, so the values are recorded in
:data:`RECORD`, and ``docs/accuracy.md`` and its table for the package
(``lmikit/sim/accuracy.json``) are rendered from them; ``test_accuracy.py`` re-simulates every
recorded point and checks those files.

    python -m tests.unit.sim.accuracy --write --jobs 2   # simulate, record, render the doc
    python -m tests.unit.sim.accuracy --doc              # render the docs from the record
    python -m tests.unit.sim.accuracy --freeze           # the record's predictions -> BEFORE
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.unit.sim import variant
from tests.unit.sim.published import PUBLICATIONS, ROWS, UNITS, unit_of
from tests.unit.sim.rows import CATEGORIES, ERROR_QUANTITIES, Row
from tests.unit.sim.variant import CHOICES, NVLINK_ALLREDUCE_GBPS, Variant

RECORD = Path(__file__).parent / "data" / "accuracy.json"
# each row's in-sample and out-of-sample prediction by the simulator before LMCache's hit
# path was modelled from the source (frozen with --freeze from that model's record)
BEFORE = Path(__file__).parent / "data" / "accuracy-before-hit-path.json"
DOC = Path(__file__).resolve().parents[3] / "docs" / "accuracy.md"
WITHIN = math.log(1.5)
# the shipped defaults first, so a tie keeps them
GRID = tuple(Variant(tp, allreduce) for allreduce in (0.0, NVLINK_ALLREDUCE_GBPS)
             for tp in (0.004, 0.002, 0.003, 0.005, 0.006))
Values = Mapping[str, Mapping[str, float]]  # row name -> variant key -> simulated value


def error(row: Row, value: float) -> float:
    return abs(math.log(value / row.published))


def scored(rows: Iterable[Row]) -> list[Row]:
    """The rows whose ratio is an error (not an ordering, not the planner's pool)."""
    return [r for r in rows if r.quantity in ERROR_QUANTITIES]


def setup_weights(rows: Sequence[Row]) -> list[float]:
    """Each row's weight: 1 / the number of rows of its setup among ``rows``."""
    count: dict[str, int] = {}
    for r in rows:
        count[r.setup] = count.get(r.setup, 0) + 1
    return [1 / count[r.setup] for r in rows]


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The least value at which the weight at or below it reaches half the total.

    >>> weighted_median([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    2.0
    >>> weighted_median([1.0, 2.0, 3.0], [0.25, 0.25, 1.0])
    3.0
    """
    half, seen = sum(weights) / 2, 0.0
    for value, weight in sorted(zip(values, weights, strict=True)):
        seen += weight
        if seen >= half - 1e-12:
            return value
    raise ValueError("no values")


def mean_error(rows: Sequence[Row], predicted: Mapping[str, float]) -> float:
    """The setup-weighted mean error of ``rows`` (the fit's objective)."""
    rows = scored(rows)
    weights = setup_weights(rows)
    return sum(w * error(r, predicted[r.name]) for r, w in zip(rows, weights, strict=True)) \
        / sum(weights)


@dataclass(frozen=True)
class Cell:
    setups: int
    rows: int
    median: float  # setup-weighted median error
    worst: float
    within: float  # setup-weighted share within 1.5x

    def to_dict(self) -> dict[str, float]:
        return {"setups": self.setups, "rows": self.rows, "median": self.median,
                "worst": self.worst, "within": self.within}


def cell(rows: Sequence[Row], predicted: Mapping[str, float]) -> Cell:
    weights = setup_weights(rows)
    errors = [error(r, predicted[r.name]) for r in rows]
    inside = sum(w for w, e in zip(weights, errors, strict=True) if e <= WITHIN + 1e-12)
    return Cell(len({r.setup for r in rows}), len(rows), weighted_median(errors, weights),
                max(errors), inside / sum(weights))


def cells(rows: Sequence[Row], predicted: Mapping[str, float]) -> dict[tuple[str, str], Cell]:
    """Per (category, quantity), and per quantity over every category ("all")."""
    rows = [r for r in scored(rows) if r.name in predicted]
    out = {}
    for category in (*CATEGORIES, "all"):
        for quantity in (*ERROR_QUANTITIES, "all"):
            group = [r for r in rows if category in ("all", r.category)
                     and quantity in ("all", r.quantity)]
            if group:
                out[(category, quantity)] = cell(group, predicted)
    return out


# ---- the fit -----------------------------------------------------------------------------
def value_key(row: Row, v: Variant) -> str:
    """The record's key for ``row`` under ``v``: its global point and the choices about the
    row's own unit (other units' choices do not change it)."""
    unit = unit_of(row)
    return Variant(v.tp_step_overhead_s, v.nvlink_allreduce_gbps,
                   tuple((k, x) for k, x in v.choices if CHOICES[k].unit == unit)).key


def predict(rows: Iterable[Row], values: Values, v: Variant) -> dict[str, float]:
    return {r.name: values[r.name][value_key(r, v)] for r in rows}


def unit_choice_variants(unit: str, base: Variant) -> list[Variant]:
    """Every combination of ``unit``'s choices at ``base``'s global point, defaults first."""
    names = [n for n, c in CHOICES.items() if c.unit == unit]
    combos = itertools.product(*(CHOICES[n].alternatives for n in names))
    return [base.global_part().with_choices(**dict(zip(names, combo, strict=True)))
            for combo in combos]


def fit(values: Values, train: Sequence[Row], choices: bool = True) -> Variant:
    """The fitted variant over ``train`` (the module's docstring gives the procedure)."""
    best = min(GRID, key=lambda g: (mean_error(train, predict(train, values, g)),
                                    GRID.index(g)))
    if not choices:
        return best
    chosen = best
    for unit in dict.fromkeys(CHOICES[n].unit for n in CHOICES):
        held = [r for r in train if unit_of(r) == unit]
        if not scored(held):
            continue
        options = unit_choice_variants(unit, best)
        pick = min(options, key=lambda v: (mean_error(held, predict(held, values, v)),
                                           options.index(v)))
        chosen = chosen.with_choices(**dict(pick.choices))
    return chosen


@dataclass(frozen=True)
class Report:
    in_sample: Variant
    in_sample_values: dict[str, float]
    out_of_sample: dict[str, float]  # row -> predicted with its unit held out
    folds: dict[str, Variant]  # unit -> the variant fitted without it
    unseen_fit: Variant
    unseen: dict[str, float]  # new sources' rows, predicted by the fit before them


def report(values: Values, rows: Sequence[Row] = ROWS) -> Report:
    in_sample = fit(values, rows)
    folds, out = {}, {}
    for unit in UNITS:
        held = [r for r in rows if unit_of(r) == unit]
        fold = fit(values, [r for r in rows if unit_of(r) != unit], choices=False)
        folds[unit] = fold
        out.update(predict(held, values, fold))
    new = [r for r in rows if PUBLICATIONS[r.publication].unseen]
    before = fit(values, [r for r in rows if not PUBLICATIONS[r.publication].unseen],
                 choices=False)
    return Report(in_sample, predict(rows, values, in_sample), out, folds, before,
                  predict(new, values, before))


# ---- simulating the record ---------------------------------------------------------------
def recorded_tasks(values: Values) -> list[tuple[Variant, str]]:
    """The (variant, unit) pairs ``values`` holds."""
    seen: dict[tuple[str, str], None] = {}
    for r in ROWS:
        for key in values.get(r.name, {}):
            seen[(key, unit_of(r))] = None
    return [(Variant.from_key(key), unit) for key, unit in seen]


def used_tasks(values: Values) -> set[tuple[Variant, str]]:
    """The (variant, unit) pairs whose values the report's predictions read."""
    rep = report(values)
    out = {(rep.in_sample.global_part().with_choices(**{
        k: x for k, x in rep.in_sample.choices if CHOICES[k].unit == unit}), unit)
        for unit in UNITS}
    out |= {(fold, unit) for unit, fold in rep.folds.items()}
    out |= {(rep.unseen_fit, unit_of(r)) for r in ROWS if PUBLICATIONS[r.publication].unseen}
    return out


def write(jobs: int = 1) -> dict[str, dict[str, float]]:
    """Every grid point for every unit, then every choice combination at the global point
    fitted in sample (the only point the fit asks choices about)."""
    values = record([(g, unit) for g in GRID for unit in UNITS], jobs)
    best = fit(values, ROWS, choices=False)
    extra = record([(v, unit) for unit in UNITS for v in unit_choice_variants(unit, best)[1:]],
                   jobs)
    for name, got in extra.items():
        values[name].update(got)
    return values


def simulate(task: tuple[Variant, str]) -> tuple[str, dict[str, float]]:
    v, unit = task
    with variant.using(v):
        return v.key, {r.name: float(r.simulated()) for r in ROWS if unit_of(r) == unit}


def record(todo: Sequence[tuple[Variant, str]], jobs: int = 1) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = {r.name: {} for r in ROWS}
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(simulate, todo))
    else:
        results = [simulate(t) for t in todo]
    for key, got in results:
        for name, value in got.items():
            values[name][key] = value
    return values


def freeze(values: Values) -> str:
    """Each row's in-sample and out-of-sample prediction under ``values``, as JSON."""
    rep = report(values)
    return json.dumps({r.name: [rep.in_sample_values[r.name], rep.out_of_sample[r.name]]
                       for r in sorted(ROWS, key=lambda r: r.name)}, indent=1) + "\n"


def load_before() -> tuple[dict[str, float], dict[str, float]]:
    """The frozen predictions (:data:`BEFORE`): in sample, out of sample."""
    data: dict[str, list[float]] = json.loads(BEFORE.read_text(encoding="utf-8"))
    return ({name: pair[0] for name, pair in data.items()},
            {name: pair[1] for name, pair in data.items()})


def load() -> dict[str, dict[str, float]]:
    data: dict[str, dict[str, float]] = json.loads(RECORD.read_text(encoding="utf-8"))
    return data


def dump(values: Mapping[str, Mapping[str, float]]) -> str:
    return json.dumps({name: dict(sorted(values[name].items())) for name in sorted(values)},
                      indent=1) + "\n"


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - the CLI
    from tests.unit.sim.accuracy_doc import (
        PACKAGE_TABLE,
        PLANNER_DOC,
        package_table,
        render,
        with_planner_block,
    )

    parser = argparse.ArgumentParser(prog="python -m tests.unit.sim.accuracy")
    parser.add_argument("--write", action="store_true", help="simulate every point, record")
    parser.add_argument("--doc", action="store_true", help="render docs/accuracy.md")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--freeze", action="store_true",
                        help="write the record's predictions as the 'before' file")
    args = parser.parse_args(argv)
    if args.freeze:
        BEFORE.write_text(freeze(load()), encoding="utf-8")
    if args.write:
        RECORD.write_text(dump(write(args.jobs)), encoding="utf-8")
    if args.write or args.doc:
        values = load()
        DOC.write_text(render(values), encoding="utf-8")
        PACKAGE_TABLE.write_text(package_table(values), encoding="utf-8")
        PLANNER_DOC.write_text(with_planner_block(PLANNER_DOC.read_text(encoding="utf-8"),
                                                  values), encoding="utf-8")
    if not (args.write or args.doc or args.freeze):
        sys.stdout.write(render(load()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
