"""Measure a deployed endpoint: the Long-Doc-QA benchmark (LMCache's method) and what the
endpoint runs.

>>> from lmikit.bench import LongDocQA
>>> [d for d, _ in LongDocQA(num_documents=2, repeat_count=2).query_prompts()]
[0, 1, 0, 1]

:func:`run_long_doc_qa` sends the rounds through any ``send`` callable; :func:`bench_file`
turns the result into the file ``lmikit plan --calibrate`` reads; :func:`endpoint_identity`
reads the model, instance, TP and tier a live endpoint runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "BenchInterrupted": "lmikit.bench._long_doc_qa",
    "BenchResult": "lmikit.bench._long_doc_qa",
    "Identity": "lmikit.bench._target",
    "LongDocQA": "lmikit.bench._long_doc_qa",
    "Measurement": "lmikit.bench._long_doc_qa",
    "RoundResult": "lmikit.bench._long_doc_qa",
    "bench_file": "lmikit.bench._long_doc_qa",
    "endpoint_identity": "lmikit.bench._target",
    "run_long_doc_qa": "lmikit.bench._long_doc_qa",
    "run_round": "lmikit.bench._long_doc_qa",
}

__all__ = [
    "BenchInterrupted",
    "BenchResult",
    "Identity",
    "LongDocQA",
    "Measurement",
    "RoundResult",
    "bench_file",
    "endpoint_identity",
    "run_long_doc_qa",
    "run_round",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.bench._long_doc_qa import (
        BenchInterrupted,
        BenchResult,
        LongDocQA,
        Measurement,
        RoundResult,
        bench_file,
        run_long_doc_qa,
        run_round,
    )
    from lmikit.bench._target import Identity, endpoint_identity
