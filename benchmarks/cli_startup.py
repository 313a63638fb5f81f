"""Wall time of `lmikit --help` and `lmikit plan <default spec>` against `python -c pass`.

Median of 10 runs each. Targets on the project's 2-core machines: --help under 0.3 s and
plan under 0.6 s (absolute wall time, interpreter start included).

    python benchmarks/cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 10
LMIKIT = Path(sys.executable).parent / "lmikit"  # the installed console script
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "lmikit --help": [str(LMIKIT), "--help"],
    "lmikit plan <default>": [str(LMIKIT), "plan", str(ROOT / "examples" / "docqa-qwen7b.yaml")],
}
TARGETS = {"lmikit --help": 0.3, "lmikit plan <default>": 0.6}


def median_wall(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    baseline = None
    print(f"{'command':28s} {'median s':>9s} {'over python':>12s} {'target':>8s}")
    ok = True
    for name, cmd in CASES.items():
        t = median_wall(cmd)
        baseline = t if baseline is None else baseline
        target = TARGETS.get(name)
        verdict = "" if target is None else ("ok" if t < target else "SLOW")
        ok &= verdict != "SLOW"
        print(f"{name:28s} {t:9.3f} {t - baseline:12.3f} "
              f"{'' if target is None else f'< {target}':>8s} {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
