from __future__ import annotations

import subprocess
import sys

from lmikit import sim


def test_simulator_imports_neither_boto3_nor_rich() -> None:
    code = ("import sys, lmikit.sim._scenario, lmikit.sim._calibrate, lmikit.sim._workloads,"
            " lmikit.sim._gpu_calibration;"
            "bad = [m for m in ('boto3', 'botocore', 'rich', 'click') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_plan_loads_only_the_engine_model_of_the_simulator() -> None:
    code = ("import sys, lmikit.planner; lmikit.planner.plan('Qwen/Qwen3-8B', 'ml.p4de.24xlarge');"
            "extra = sorted(m for m in sys.modules if m.startswith('lmikit.sim.')"
            " and m not in ('lmikit.sim._engine', 'lmikit.sim._coefficients',"
            " 'lmikit.sim._stores'));"
            "print(extra); sys.exit(1 if extra else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert sim.__all__ == sorted(sim.__all__)
    for name in sim.__all__:
        assert getattr(sim, name) is not None
