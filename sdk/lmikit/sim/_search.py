"""The minimizer :mod:`lmikit.sim` fits with: no dependencies, a budget of calls.

A replay's loss is piecewise: requests that share steps, queue or finish in another order
move it in steps, so each round is a coordinate search (stepping over a ledge, not only down
its slope), then Nelder-Mead from the best point found.

>>> x = search(lambda v: (v[0] - 1.0) ** 2 + (v[1] + 2.0) ** 2, [0.0, 0.0], 400)
>>> [round(v, 2) for v in x]
[1.0, -2.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

SEARCH_SPANS = (1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01)  # log space: x e^1 down to x 1.01


class _OutOfEvaluations(Exception):
    pass


def search(f: Callable[[list[float]], float], x0: list[float],
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
