"""``--calibrate``: coefficients fitted to a ``lmikit bench`` file, for the candidates like it.

A fit is evidence only for what the bench ran on, as ``lmikit simulate --calibrate`` holds
it: it is fitted on the bench's instance type and TP (with the spec's model and settings)
and applied to the candidates of that instance type and TP; every other candidate runs the
uncalibrated engine. A file that does not say its instance type or TP, or that names
another model, is refused unless ``calibrate_anyway`` (then the spec's instance type and
TP stand in for what it leaves out, and the fit's notes say what was not checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit.advisor._search import Candidate
from lmikit.catalog import ml_name
from lmikit.errors import PlanError

if TYPE_CHECKING:
    from lmikit.sim import Deployment, Fit

Fitter = Callable[["Deployment", Path, bool], "Fit"]


def fit_file(dep: Deployment, bench_path: Path, anyway: bool) -> Fit:
    """:func:`lmikit.sim.fit` of the bench file at ``bench_path`` on ``dep``."""
    from lmikit.sim import fit, load_bench

    return fit(dep, load_bench(bench_path), unverified=anyway)


@dataclass(frozen=True)
class Calibration:
    """A fit, and the instance type and TP of the candidates it applies to."""

    bench: Path
    instance_type: str
    tp: int
    fit: Fit
    anyway: bool

    def applies(self, c: Candidate) -> bool:
        return (c.instance_type, c.tp) == (self.instance_type, self.tp)

    def flags(self) -> str:
        """The ``lmikit simulate`` flags that fit it again."""
        return f"--calibrate {self.bench}" + (" --calibrate-anyway" if self.anyway else "")

    def to_dict(self, applied: int, uncalibrated: int) -> dict[str, Any]:
        return {**self.fit.to_dict(), "bench": str(self.bench),
                "instance_type": self.instance_type, "tp": self.tp,
                "candidates_calibrated": applied, "candidates_uncalibrated": uncalibrated}


def calibrate(planned: Callable[[Candidate], Deployment | str], bench_path: str | Path,
              anyway: bool, spec_layout: tuple[str, int] | None,
              fitter: Fitter = fit_file) -> Calibration:
    """Fit the bench file on the deployment it names, as ``planned`` plans a candidate (or
    says why not); ``spec_layout`` is the spec's (instance type, TP), None for ``--model``."""
    from lmikit.sim import load_bench

    path = Path(bench_path)
    bench = load_bench(path)
    instance = ml_name(bench.instance) if bench.instance else None
    tp = bench.tp
    if instance is None or tp is None:
        unknown = " and ".join(n for n, v in (("instance type", instance), ("TP", tp))
                               if v is None)
        said = f"--calibrate {str(path)!r}: the bench file does not say which {unknown} it " \
               "was measured on"
        if spec_layout is None:
            raise PlanError(f"{said}, and --model names none; give the SPEC it was measured "
                            "with (and --calibrate-anyway)")
        if not anyway:
            raise PlanError(f"{said}, so which candidates it is evidence for is unknown: write "
                            "it with lmikit bench from the deployment's spec, or pass "
                            "--calibrate-anyway to apply it to the spec's instance type and TP")
        instance = instance or spec_layout[0]
        tp = tp or spec_layout[1]
    mode = bench.kv_cache or "off"
    dep = planned(Candidate(instance, tp, 1, 1, mode, "auto", "auto", "sticky_session"))
    if isinstance(dep, str):
        raise PlanError(f"--calibrate {str(path)!r}: the bench ran on {instance} TP {tp} with "
                        f"kv_cache {mode}, which the planner refuses here: {dep}")
    return Calibration(path, instance, tp, fitter(dep, path, anyway), anyway)
