"""``advise()``: the cheapest deployment that meets the objectives, for a workload."""

from __future__ import annotations

import re
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit.advisor._calibration import Calibration, Fitter, calibrate, fit_file
from lmikit.advisor._runs import Runner, repeated_tokens
from lmikit.advisor._search import Entry, SearchResult, search
from lmikit.advisor._slo import Slo, parse_slos
from lmikit.advisor._space import Deployments, Settings, build_space
from lmikit.advisor._trust import BASIS, SAMPLE, SOURCE, category, figures, heading, trust
from lmikit.advisor._write import spec_data, spec_yaml
from lmikit.errors import PlanError, safe_repr

if TYPE_CHECKING:
    from lmikit.catalog import Price, PriceTable
    from lmikit.sim import Workload
    from lmikit.spec import DeploymentSpec

MAX_INSTANCES = 64


@dataclass(frozen=True)
class Advice:
    """What :func:`advise` found; :meth:`to_dict` is ``lmikit advise --json``."""

    slos: list[Slo]
    result: SearchResult
    seconds: float
    region: str
    prices: dict[str, Price]
    workload: Workload
    seed: int
    base: DeploymentSpec
    base_dir: Path | None
    notes: list[str] = field(default_factory=list)
    calibration: Calibration | None = None
    planned: int = 0  # candidates the planner and the budget let through
    calibrated: int = 0  # of those, the ones the calibration applies to
    repeats: int = 0  # runs taken from a candidate whose run cannot differ

    @property
    def best(self) -> Entry | None:
        return self.result.best

    @property
    def meets_slo(self) -> bool:
        return self.best is not None and self.best.meets_slo

    @property
    def pareto(self) -> list[Entry]:
        return self.result.pareto

    def _layout(self) -> tuple[str | None, str | None]:
        """The answer's KV-cache mode and routing; none without an answer."""
        c = None if self.best is None else self.best.candidate
        return (None, None) if c is None else (c.kv_cache, c.routing)

    def trust(self) -> list[str]:
        """How far the figures can be trusted: out of sample, per quantity involved in the
        answer's category."""
        return trust([s.metric for s in self.slos], *self._layout())

    def trust_heading(self) -> str:
        """The line above :meth:`trust`'s: out of sample, and the answer's category."""
        return heading(*self._layout())

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        kv_cache, routing = self._layout()
        return {"candidates_evaluated": r.considered, "pruned": r.pruned,
                "seconds": round(self.seconds, 2),
                "best": None if r.best is None else r.best.to_dict(),
                "pareto": [e.to_dict() for e in r.pareto],
                "misses": r.misses, "slo": [s.text() for s in self.slos],
                "simulated": {"screened": r.screened, "full": r.refined,
                              "taken_from_an_identical_run": self.repeats},
                "trust": {"source": SOURCE, "sample": SAMPLE, "against": BASIS,
                          "category": None if kv_cache is None or routing is None else
                          category(kv_cache, routing),
                          "figures": [a.to_dict() for a in figures(
                              [s.metric for s in self.slos], kv_cache, routing)],
                          "lines": self.trust()},
                "notes": self.notes,
                "calibration": None if self.calibration is None else
                self.calibration.to_dict(self.calibrated, self.planned - self.calibrated)}

    def calibration_lines(self) -> list[str]:
        """What the fit was, and which candidates it applies to; none without one."""
        cal = self.calibration
        if cal is None:
            return []
        best = self.best
        on_best = best is not None and cal.applies(best.candidate)
        return [*cal.fit.summary(),
                f"The fit applies to the {self.calibrated:,} candidates on {cal.instance_type} "
                f"TP {cal.tp}; the other {self.planned - self.calibrated:,} run the "
                "uncalibrated engine" + ("" if best is None else
                                         "; the answer's figures are " +
                                         ("calibrated" if on_best else "uncalibrated"))]

    def comments(self, path: str = "SPEC") -> list[str]:
        """The comment block of the spec written to ``path``."""
        best = self.best
        if best is None:
            return []
        f = best.figures
        price = self.prices[best.candidate.instance_type]
        chosen = ("the cheapest candidate meeting " if best.meets_slo else
                  "the closest candidate (none met) to ") + ", ".join(s.text() for s in self.slos)
        return [
            f"Written by lmikit advise: {chosen},",
            f"for the {self.workload.name} workload below.",
            f"Predicted: TTFT p50 {f.ttft_p50_s:g} s, p90 {f.ttft_p90_s:g} s, "
            f"{f.throughput_tokens_s:g} tokens/s, ${f.usd_per_hour:g}/hour, "
            f"${f.usd_per_1k_tokens:g} per 1K tokens.",
            f"Price: {price.source} (as of {price.as_of}).",
            f"These figures again: lmikit simulate {path} {self.simulate_flags()}",
            *self.calibration_lines(),
            *textwrap.wrap(self.trust_heading(), 88),
            *(text for line in self.trust()
              for text in textwrap.wrap(line, 88, initial_indent="  ", subsequent_indent="    ")),
            "",
        ]

    def simulate_flags(self) -> str:
        """The ``lmikit simulate`` flags that run this workload and seed again."""
        work = self.workload
        flags = [f"--workload {work.name}"]
        for key, value in sorted(work.params.items()):
            if work.name == "trace" and key == "requests":
                continue  # the trace's own length
            flag = "--think-time" if key == "think_time_s" else "--" + key.replace("_", "-")
            flags.append(f"{flag} {value}")
        cal = self.calibration
        if cal is not None and self.best is not None and cal.applies(self.best.candidate):
            flags.append(cal.flags())
        return " ".join([*flags, f"--seed {self.seed}"])

    def write_spec(self, path: str | Path) -> Path:
        """Write the best candidate as a spec that ``lmikit validate`` accepts."""
        if self.best is None:
            raise PlanError("no candidate to write: the search ran none (see the notes)")
        target = Path(path)
        data = spec_data(self.base, self.best, self.region, self.base_dir,
                         target.parent.resolve())
        target.write_text(spec_yaml(data, self.comments(str(target))))
        return target


def advise(workload: Workload, slo: str | Sequence[str], *,
           spec: DeploymentSpec | str | Path | None = None, model: str | None = None,
           config_path: str | Path | None = None, region: str | None = None,
           instance_types: Sequence[str] | None = None, max_instances: int = 4,
           max_usd_hour: float | None = None, prices: PriceTable | None = None,
           kv_caches: Sequence[str] | None = None, routings: Sequence[str] | None = None,
           seed: int = 0, base_dir: str | Path | None = None,
           calibrate_with: str | Path | None = None, calibrate_anyway: bool = False,
           fitter: Fitter = fit_file) -> Advice:
    """The cheapest deployment of ``spec`` (a path or a loaded spec) or ``model`` that
    meets every ``slo`` (``"ttft_p90_s=1.0"``, ...) on ``workload``, from the instance types
    sold on demand in ``region`` (default: the spec's, else us-east-1) or named by
    ``instance_types`` globs, up to ``max_instances`` instances and ``max_usd_hour``.

    ``base_dir`` resolves a loaded spec's relative paths (a path's own folder by default).
    ``calibrate_with``: a ``lmikit bench`` file, fitted on its instance type and TP and
    applied to the candidates of that type and TP (``calibrate_anyway``: a file that leaves
    them unknown applies to the spec's); ``fitter(deployment, path, anyway)`` fits it.
    """
    start = time.perf_counter()
    slos = parse_slos(slo)
    base, folder = _base(spec, model, config_path, region, base_dir)
    if isinstance(max_instances, bool) or not isinstance(max_instances, int) or \
            not 1 <= max_instances <= MAX_INSTANCES:
        raise PlanError(f"max_instances is {safe_repr(max_instances)}; expected a whole "
                        f"number from 1 to {MAX_INSTANCES}")
    settings = Settings.from_spec(base, folder, region)
    if workload.chunk_size != settings.chunk_size:
        raise PlanError(f"the workload was cut into {workload.chunk_size}-token chunks but the "
                        f"spec's kv_cache.chunk_size is {settings.chunk_size}")
    calibration = None
    if calibrate_with is not None:
        layout = None if model is not None else (base.instance.type,
                                                 base.engine.tensor_parallel_degree)
        calibration = calibrate(Deployments(settings).of, calibrate_with, calibrate_anyway,
                                layout, fitter)
    deployments = Deployments(settings, calibration)
    longest = max(r.prompt_tokens + r.output_tokens for r in workload.requests)
    space = build_space(settings, deployments, instance_globs=instance_types, table=prices,
                        max_instances=max_instances, max_usd_hour=max_usd_hour,
                        modes=kv_caches, routings=routings,
                        repeated_tokens=repeated_tokens(workload), longest_request=longest)
    runner = Runner(deployments, workload, space.prices, prices, seed, space.candidates)
    result = search(space.candidates, runner.run, slos, lower_bound=runner.lower_bound,
                    screen=runner.small is not None, pruned_before=space.refused)
    notes = list(space.notes)
    if not space.candidates:
        notes.append("no candidate could be simulated: every instance type was left out, "
                     "refused by the planner or over the budget")
    calibrated = sum(1 for c in space.candidates if calibration and calibration.applies(c))
    return Advice(slos, result, time.perf_counter() - start, settings.region, space.prices,
                  workload, seed, base, folder, notes, calibration, len(space.candidates),
                  calibrated, runner.repeats)


def _base(spec: DeploymentSpec | str | Path | None, model: str | None,
          config_path: str | Path | None, region: str | None,
          base_dir: str | Path | None) -> tuple[DeploymentSpec, Path | None]:
    """The spec the candidates vary, and the folder its relative paths start from."""
    from lmikit.spec import load_spec, load_spec_text

    if (spec is None) == (model is None):
        raise PlanError("give a spec or a model, not both")
    if isinstance(spec, (str, Path)):
        return load_spec(spec), Path(base_dir) if base_dir else Path(spec).parent
    if spec is not None:
        return spec, Path(base_dir) if base_dir else None
    name = "advise-" + re.sub(r"[^a-zA-Z0-9]+", "-", str(model).split("/")[-1]).strip("-")
    text = (f"api_version: v1\nname: {name[:40].rstrip('-')}\n"
            f"region: {region or 'us-east-1'}\nmodel:\n  id: {model}\n"
            + (f"  config_path: {Path(config_path).resolve()}\n" if config_path else "")
            + "instance:\n  type: ml.g6e.2xlarge\n")
    return load_spec_text(text, source=f"--model {model}"), None
