"""Which alternatives the doctor's simulation weighs: only ones the endpoint could run."""

from __future__ import annotations

from lmikit.deploy._doctor import Doctor
from lmikit.spec._loader import load_spec_text
from tests.unit.test_spec import BASE

P4DE = """
instance: {type: ml.p4de.24xlarge, copies_per_instance: COPIES}
engine: {tensor_parallel_degree: 4, max_model_len: 32768}
routing: {strategy: random}
workload: {reused_context_tokens: 60000, typical_request_tokens: 6000, concurrency: 2}
"""


def _alternatives(copies: int) -> set[str]:
    text = BASE.replace("instance:\n  type: ml.g6e.2xlarge\n", "")
    assert "instance:" not in text
    spec = load_spec_text(text + P4DE.replace("COPIES", str(copies)))
    return set(Doctor(spec).simulated()["alternatives"])


def test_doctor_offers_sticky_sessions_only_where_one_copy_holds_an_instance():
    """SageMaker pins a session to an instance and LMI keeps it in one copy
    (lmikit.render._sagemaker.sessions_problem): with two copies on one instance the render
    refuses sessions, so the doctor does not suggest them."""
    assert any(a.startswith("sticky_session/") for a in _alternatives(1))
    assert not any(a.startswith("sticky_session/") for a in _alternatives(2))
