"""The whole fault matrix: every API call of deploy, update, destroy and adapter registration,
each faulted (throttled, 5xx, its answer lost, its resource Failed) or interrupted (Ctrl-C
once, twice) in turn, plus two runs at once of each; against the fake SageMaker and moto.

    python benchmarks/fault_matrix.py [--scenario update] [--fault lost] [--jobs 2] [--json]
    python benchmarks/fault_matrix.py --baseline /tmp/old-sdk   # the same cases, older lmikit

Prints, per scenario and in total: cases tried, faults that fired, survived (old or new
state, or a partial one the error explains; no orphans, nothing lost, no traceback, and a
re-run converges), how many ended old / new / partial / neither, orphans, lost artifacts,
tracebacks and runs that did not converge; then every case that did not survive.
The cases themselves are defined in tests/functional/_matrix.py; every run creates its role
and applies scaling, dashboard and alarms, whose calls are faulted too.

Last full run (``--jobs 2``, 517 s): 568 cases (deploy 175, update 201, destroy 156,
register 36), 568 fired and survived: 46 old, 445 new, 77 partial, 0 neither, 0 orphans,
0 lost, 0 tracebacks, 0 not converged.

``--baseline DIR`` measures an older deployer with the same cases and judge: DIR holds an
older ``lmikit`` package (e.g. ``git archive <rev> sdk/lmikit | tar -x -C DIR
--strip-components=1``) whose ``testing`` package is replaced by this one's (the faults the
cases inject need it); its Ctrl-C is a KeyboardInterrupt raised in the call.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--baseline" in sys.argv:  # before anything imports lmikit
    _old = Path(sys.argv[sys.argv.index("--baseline") + 1]).resolve()
    sys.path.insert(0, str(_old))
os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                  AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(var, None)

from tests.functional import _matrix as matrix  # noqa: E402

COLUMNS = ("cases", "fired", "survived", "old", "new", "partial", "neither", "orphans",
           "lost", "tracebacks", "not_converged")


def _run(args: tuple[matrix.Case, Any, Any]) -> matrix.Outcome:
    case, old, new = args
    return matrix.run_case(case, old, new)


def _tally(outcomes: list[matrix.Outcome]) -> dict[str, int]:
    t: Counter[str] = Counter()
    for o in outcomes:
        t["cases"] += 1
        t["fired"] += o.fired
        t["survived"] += o.survived
        t[o.final] += 1
        t["orphans"] += bool(o.orphans)
        t["lost"] += bool(o.lost)
        t["tracebacks"] += o.traceback is not None
        t["not_converged"] += not o.converged
    return {k: t[k] for k in COLUMNS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", choices=matrix.SCENARIOS, action="append")
    ap.add_argument("--fault", choices=(*matrix.FAULTS, "concurrent"), action="append")
    ap.add_argument("--jobs", type=int, default=1, help="processes (each case is isolated)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--baseline", metavar="DIR", help="measure the lmikit package in DIR")
    args = ap.parse_args()
    scenarios = args.scenario or list(matrix.SCENARIOS)
    faults = set(args.fault or (*matrix.FAULTS, "concurrent"))
    start = time.perf_counter()
    results: dict[str, list[matrix.Outcome]] = {}
    for scenario in scenarios:
        old, new, targets = matrix.reference(scenario)
        cases = [c for c in matrix.cases(scenario, targets) if c.fault in faults]
        if "concurrent" in faults:
            cases.append(matrix.Case(scenario, "concurrent"))
        work = [(c, old, new) for c in cases]
        if args.jobs > 1:
            with cf.ProcessPoolExecutor(args.jobs) as pool:
                results[scenario] = list(pool.map(_run, work, chunksize=4))
        else:
            results[scenario] = [_run(w) for w in work]
    elapsed = time.perf_counter() - start
    import lmikit

    print(f"lmikit from {Path(lmikit.__file__).parent}", file=sys.stderr)
    every = [o for outs in results.values() for o in outs]
    table = {s: _tally(outs) for s, outs in results.items()} | {"total": _tally(every)}
    broken = [o for o in every if not o.survived]
    if args.json:
        print(json.dumps({"totals": table, "seconds": round(elapsed, 1), "broken": [
            {"case": o.case.label, "final": o.final, "orphans": o.orphans, "lost": o.lost,
             "converged": o.converged, "traceback": o.traceback, "message": o.message}
            for o in broken]}, indent=2))
    else:
        print(f"{'':10}" + "".join(f"{c:>14}" for c in COLUMNS))
        for name, row in table.items():
            print(f"{name:10}" + "".join(f"{row[c]:>14}" for c in COLUMNS))
        print(f"\n{len(every)} cases in {elapsed:.0f} s")
        for o in broken:
            print(f"\nNOT SURVIVED {o.case.label}: final {o.final}, orphans {o.orphans}, "
                  f"lost {o.lost}, converged {o.converged}")
            print("  " + o.message.replace("\n", "\n  "))
            if o.traceback:
                print(o.traceback)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
