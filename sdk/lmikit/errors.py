"""The lmikit exception tree.

Every error the library raises on purpose derives from :class:`LmikitError`, so a
caller (and the CLI) can catch one type::

    LmikitError
     +-- SpecError          the YAML spec is invalid (lists every problem)
     +-- CatalogError       unknown model or instance type, unreadable config.json
     +-- PlanError          the spec cannot be served as asked (does not fit)
     |    +-- SimulationError  a workload, trace or bench file cannot be simulated
     +-- RenderError        a target cannot be rendered from this spec
     +-- DeployError        a call to AWS failed; says what was rolled back or left
     |    +-- WaitTimeout   a resource did not reach its state in time
     |    +-- AwsError      one AWS call failed (``operation``, ``code``; ``lost`` when the
     |    |                 request may have reached AWS but no answer came back)
     |    +-- LeaseHeld     another run holds the deployment's lease (names the holder)
     |    +-- DeployFailed  a deploy, destroy or gc stopped; ``state`` says where it left the
     |         |            account: "old" (as before the run), "new" (finished) or "partial"
     |         +-- Interrupted  stopped by Ctrl-C
     +-- AdapterError       a LoRA adapter or formatter failed validation
     +-- RegionMissing      no AWS region is given or configured: no client can be made
     +-- InvokeError        a runtime call to an endpoint failed
     |    +-- BenchStopped  a benchmark stopped at a failed request (``rounds``: what it
     |                      measured)
     +-- MissingPackage     a package this use needs is not installed (names the pip
                            command; also an ImportError)

Third-party errors (pydantic, yaml, botocore) are mapped to these once, at the edge,
with ``raise ... from exc``.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class LmikitError(Exception):
    """Root of every error lmikit raises on purpose."""

    kind = "Error"


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` with integers that never go through ``int.__str__`` when they are huge."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 6, 6, 6, 6
        self.maxstring = self.maxother = self.maxlong = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:  # str() of an int over 4,300 digits raises ValueError
            digits = int(x.bit_length() * 0.30103) + 1
            return f"<{'a negative' if x < 0 else 'an'} integer of about {digits} digits>"
        return super().repr_int(x, level)


_REPR = _BoundedRepr()


def safe_repr(value: object, limit: int = 80) -> str:
    """``repr`` for messages: bounded work and length, never raises.

    >>> safe_repr(10 ** 5000)
    '<an integer of about 5001 digits>'
    >>> safe_repr("x" * 500, limit=12)
    "'xxxxxxx...'"
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # a broken __repr__ must not hide the real problem
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        cut = text[:limit - 4]
        text = cut + ("...'" if cut[:1] in "'\"" else "...")
    return text


@dataclass(frozen=True)
class Problem:
    """One problem found in a spec: where, what was given, and what is allowed."""

    path: str
    message: str
    value: object = None
    line: int | None = None
    has_value: bool = field(default=True, compare=False)

    def render(self, source: str | None = None) -> str:
        where = self.path or "<root>"
        loc = ""
        if source and self.line is not None:
            loc = f" ({source}:{self.line})"
        elif self.line is not None:
            loc = f" (line {self.line})"
        got = f" [got {safe_repr(self.value)}]" if self.has_value else ""
        return f"{where}{loc}: {self.message}{got}"


MAX_LISTED_PROBLEMS = 20
"""A message lists at most this many problems, then how many more there are (the
exception's ``problems`` keeps every one): the first screenful is what a person fixes first."""


def problem_list(head: str, problems: Sequence[Problem], source: str | None = None) -> str:
    """``head``, then one line per problem: the first :data:`MAX_LISTED_PROBLEMS`, then a
    count of the rest.

    >>> print(problem_list("3 problem(s)", [Problem(f"adapters.{i}.source", "outside")
    ...                                     for i in range(3)]))
    3 problem(s)
      - adapters.0.source: outside [got None]
      - adapters.1.source: outside [got None]
      - adapters.2.source: outside [got None]
    """
    lines = [head] + ["  - " + p.render(source) for p in problems[:MAX_LISTED_PROBLEMS]]
    if len(problems) > MAX_LISTED_PROBLEMS:
        lines.append(f"  ... and {len(problems) - MAX_LISTED_PROBLEMS:,} more")
    return "\n".join(lines)


class SpecError(LmikitError, ValueError):
    """The spec is invalid. ``problems`` lists every problem found, not just the first; the
    message shows the first :data:`MAX_LISTED_PROBLEMS` (:func:`problem_list`)."""

    kind = "SpecError"

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(problem_list(f"{len(self.problems)} problem(s) in {source or 'spec'}",
                                      self.problems, source))


class CatalogError(LmikitError, LookupError):
    kind = "CatalogError"


class PlanError(LmikitError, ValueError):
    kind = "PlanError"


class RenderError(LmikitError, ValueError):
    kind = "RenderError"


class DeployError(LmikitError, RuntimeError):
    kind = "DeployError"


class WaitTimeout(DeployError):
    kind = "WaitTimeout"


class AwsError(DeployError):
    """One AWS call failed. ``code`` is AWS's error code ("" for a network or credentials
    problem); ``lost`` is True when the request may have reached AWS but its answer did not
    come back (a read timeout or a dropped connection), so it may have been applied."""

    kind = "DeployError"

    def __init__(self, message: str, *, operation: str, code: str = "", status: int = 0,
                 lost: bool = False) -> None:
        super().__init__(message)
        self.operation = operation
        self.code = code
        self.status = status
        self.lost = lost


class RegionMissing(LmikitError, LookupError):
    """No region was given and boto3 finds none configured (AWS_DEFAULT_REGION, AWS_REGION,
    a profile's ``region``): no AWS client can be made. The message says how to give one."""

    kind = "Error"


class LeaseHeld(DeployError):
    """Another run holds the deployment's lease; the message names it and its expiry."""

    kind = "LeaseHeld"


class DeployFailed(DeployError):
    """A deploy, destroy or gc stopped before it finished.

    ``state`` is where the account is left: ``"old"`` (exactly as before the run),
    ``"new"`` (every change applied) or ``"partial"`` (``left`` lists what remains to be
    done or undone, and the message says which command finishes it).
    """

    kind = "DeployError"

    def __init__(self, message: str, *, state: str, left: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.state = state
        self.left = left


class Interrupted(DeployFailed):
    """Stopped by Ctrl-C (``state`` as for :class:`DeployFailed`)."""

    kind = "Interrupted"


class AdapterError(LmikitError, ValueError):
    """An adapter or formatter is refused. ``problems`` lists each as ``(field, message)``,
    field ``"source"`` or ``"formatter"`` (the spec field it belongs to), when known."""

    kind = "AdapterError"

    def __init__(self, message: str, problems: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class InvokeError(LmikitError, RuntimeError):
    kind = "InvokeError"


class BenchStopped(InvokeError):
    """A benchmark stopped at a failed request. ``rounds`` (``lmikit.bench.RoundResult``
    objects) hold every request measured; the failure is ``__cause__``."""

    kind = "BenchStopped"

    def __init__(self, message: str, rounds: list[Any] | None = None) -> None:
        super().__init__(message)
        self.rounds = rounds or []


class SimulationError(PlanError):
    """A workload, trace or calibration (bench) file cannot be simulated as given."""

    kind = "SimulationError"


class MissingPackage(LmikitError, ImportError):
    """A package is not installed; the message names what needs it and the ``pip install``
    that adds it (:mod:`lmikit._extras`)."""

    kind = "Error"
