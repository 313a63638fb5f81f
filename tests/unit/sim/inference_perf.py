"""What the 2026 llm-d rebuilds share of inference-perf (kubernetes-sigs/inference-perf at
3c7c4a3, the image their bench jobs ran): its length sampler and its report's time base.

- ``utils/distribution.py``, ``sample_from_distribution``: draws, then clips, rounds and
  clips again to the configured range; ``type: lognormal`` turns the configured mean and
  standard deviation into the underlying normal's mu and sigma.
- ``reportgen/base.py``, ``summarize_requests``: token rates and latency percentiles are
  over the successful requests, the time base is last end - first start over every request,
  and a request that failed by the client's timeout ends at its send + the timeout.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from lmikit.sim.loop import RunResult
from lmikit.sim.workloads import Request

QWEN3_VOCAB = 151_643  # the Qwen3 tokenizer's vocab_size (its added tokens' ids start here)


def clip_round(values: np.ndarray, low: int, high: int) -> list[int]:
    """``sample_from_distribution``'s tail: clip, round, clip.

    >>> clip_round(np.array([0.4, 2.5, 9.0]), 1, 5)
    [1, 2, 5]
    """
    return [int(v) for v in np.clip(np.round(np.clip(values, low, high)).astype(int), low, high)]


def lognormal(rng: np.random.Generator, mean: float, sd: float, low: int, high: int,
              count: int) -> list[int]:
    """``sample_from_distribution`` for ``type: lognormal``."""
    sigma_sq = math.log(1.0 + (sd / mean) ** 2)
    mu = math.log(mean) - sigma_sq / 2.0
    return clip_round(rng.lognormal(mean=mu, sigma=math.sqrt(sigma_sq), size=count), low, high)


def successes_and_span(reqs: Sequence[Request], out: RunResult, failed: Collection[int],
                       timeout_s: float) -> tuple[list[Request], float]:
    """The requests ``summarize_requests`` reports on, and the seconds its rates divide by."""
    ok = [r for r in reqs if r.id not in failed]
    start = min(out.arrival[r.id] for r in reqs)
    end = max(out.arrival[r.id] + timeout_s if r.id in failed else out.end[r.id] for r in reqs)
    return ok, end - start
