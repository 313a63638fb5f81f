"""A small evaluator of CloudWatch metric math, for one datapoint at a time.

It implements what the dashboards and alarms use, with the rules of the CloudWatch User Guide
("Use metric math": Metric math syntax and functions, Using IF expressions):

* arithmetic (``+ - * /``): a missing value counts as 0; a division by zero drops the point;
* comparisons (``== != <= >= < >``) give 1 or 0, a missing value counting as 0; ``AND`` /
  ``OR`` combine them;
* ``IF(condition, true_value[, false_value])``: a missing condition drops the point; a true
  condition gives the true value (0 when it is missing); a false one the false value, or no
  point when there is none;
* ``FILL(x, value)``: the value where ``x`` is missing;
* ``PERIOD(m)``: the metric's period in seconds.

``None`` stands for "no datapoint". Functions over whole series (SUM, MAX, RATE, ...) are not
implemented: nothing lmikit renders uses them.

>>> evaluate("IF(a > 0, b / a)", {"a": 0, "b": 5}) is None
True
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Value = float | None

_ARITHMETIC: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Pow: operator.pow}
_COMPARE: dict[type, Callable[[float, float], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge}


def evaluate(expression: str, values: Mapping[str, Value], *, period: int = 60) -> Value:
    """The expression's value for one timestamp, given each id's value there."""
    source = (expression.replace("&&", " and ").replace("||", " or ")
              .replace(" AND ", " and ").replace(" OR ", " or "))
    tree = ast.parse(source, mode="eval")
    return _eval(tree.body, values, period)


def _num(value: Value) -> float:
    return 0.0 if value is None else float(value)


def _eval(node: ast.AST, values: Mapping[str, Value], period: int) -> Value:
    def ev(n: ast.AST) -> Value:
        return _eval(n, values, period)

    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise KeyError(f"metric math names {node.id!r}, which the query does not define")
        return values[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_num(ev(node.operand))
    if isinstance(node, ast.BinOp):
        left, right = _num(ev(node.left)), _num(ev(node.right))
        if isinstance(node.op, ast.Div):
            return None if right == 0 else left / right
        return _ARITHMETIC[type(node.op)](left, right)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return float(_COMPARE[type(node.ops[0])](_num(ev(node.left)),
                                                  _num(ev(node.comparators[0]))))
    if isinstance(node, ast.BoolOp):
        parts = [_num(ev(v)) != 0 for v in node.values]
        return float(all(parts) if isinstance(node.op, ast.And) else any(parts))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _call(node.func.id, node.args, ev, period)
    raise ValueError(f"unsupported metric math: {ast.dump(node)}")


def _call(name: str, args: list[ast.expr], ev: Callable[[ast.AST], Value],
          period: int) -> Value:
    if name == "IF":
        condition = ev(args[0])
        if condition is None:
            return None
        if condition != 0:
            return _num(ev(args[1]))
        return ev(args[2]) if len(args) > 2 else None
    if name == "FILL":
        value = ev(args[0])
        return ev(args[1]) if value is None else value
    if name == "PERIOD":
        return float(period)
    raise ValueError(f"unsupported metric math function {name}")


def alarm_state(request: Mapping[str, Any],
                values: Mapping[str, Value] | Sequence[Mapping[str, Value]]) -> str:
    """``ALARM`` or ``OK`` for one evaluation of a metric-math alarm whose queries read
    ``values`` (id -> the period's statistic; a list: one mapping per period, oldest first):
    ``DatapointsToAlarm`` (M) of the last ``EvaluationPeriods`` (N) breaching, a missing
    result counted as ``TreatMissingData`` says (notBreaching or breaching)."""
    periods = [values] if isinstance(values, Mapping) else list(values)
    n = request["EvaluationPeriods"]
    m = request.get("DatapointsToAlarm") or n
    assert len(periods) == n, f"the alarm evaluates {n} period(s), {len(periods)} given"
    (result,) = [q for q in request["Metrics"] if q.get("ReturnData")]
    missing = request["TreatMissingData"]
    assert missing in ("notBreaching", "breaching"), missing
    ops: dict[str, Callable[[float, float], bool]] = {
        "LessThanThreshold": operator.lt, "LessThanOrEqualToThreshold": operator.le,
        "GreaterThanThreshold": operator.gt,
        "GreaterThanOrEqualToThreshold": operator.ge}
    breaching = 0
    for period in periods:
        value = evaluate(result["Expression"], period)
        if value is None:
            breaching += missing == "breaching"
        else:
            breaching += ops[request["ComparisonOperator"]](value, request["Threshold"])
    return "ALARM" if breaching >= m else "OK"
