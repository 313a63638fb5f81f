"""What a workload is made of: requests, the phases that send them, the workload.

The builders in :mod:`lmikit.sim` make these; the event loop reads them for every
simulated request, so this module is one of those a wheel compiles (``setup.py``), where the
builders, which check what users give them, stay Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Request:
    """One request: its chunk keys (full chunks only), sizes, and routing hints."""

    id: int
    keys: tuple[int, ...]
    prompt_tokens: int
    output_tokens: int
    session: int
    prefix_id: int | None = None
    arrival_s: float | None = None  # open-loop phases only
    # calibration replays: cached tokens per tier, ((tier, tokens), ...) in tier order
    forced: tuple[tuple[str, int], ...] | None = None
    # sent as token ids (vLLM's completions API takes a list of ints as ``prompt``): vLLM's
    # API server does not tokenize it (vLLM 0.23.0 ``renderers/inputs/preprocess.py`` makes it
    # a ``TokensPrompt``; ``renderers/base.py`` tokenizes only prompts without token ids)
    pretokenized: bool = False


class Dispatcher(Protocol):
    """A load generator's own rule for when a closed-loop phase sends its requests.

    Given to a :class:`Phase`, it replaces the phase's users: the loop sends what
    :meth:`start` returns when the phase starts, and what :meth:`finished` returns when one
    of the phase's requests ends. It must send each of the phase's requests exactly once.
    """

    def start(self) -> list[Request]: ...

    def finished(self, request_id: int) -> list[Request]: ...


@dataclass(frozen=True)
class Phase:
    name: str
    sessions: list[list[Request]]
    concurrency: int = 1
    think_time_s: float = 0.0
    measured: bool = True
    open_loop: bool = False
    dispatcher: Dispatcher | None = None  # sends the sessions' requests in its own order


@dataclass(frozen=True)
class Workload:
    name: str
    phases: list[Phase]
    chunk_size: int
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def requests(self) -> list[Request]:
        return [r for p in self.phases for s in p.sessions for r in s]
