"""``lmikit bench``: the Long-Doc-QA benchmark (LMCache's method) against an endpoint."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lmikit.cli._common import check_writable, echo_json, spec_or_endpoint

if TYPE_CHECKING:
    from lmikit.bench import BenchResult, Identity, LongDocQA, Measurement
    from lmikit.client import Endpoint, Session


# a stream whose deltas held no answer text, reasoning or tool call (an empty answer, or an
# output formatter that drops the text) has no first token: its total time is no TTFT
NO_TOKEN = "no generated token arrived (only the role and usage), so it has no TTFT"


@click.command("bench")
@click.argument("target", metavar="SPEC_OR_ENDPOINT")
@click.option("--num-documents", type=click.IntRange(1), default=46, show_default=True,
              help="Distinct documents (each sent once in warmup).")
@click.option("--document-tokens", type=click.IntRange(1), default=10_000, show_default=True,
              help="Length of each document in tokens (\"hi \" repeated).")
@click.option("--output-tokens", type=click.IntRange(1), default=100, show_default=True,
              help="max_tokens of every request.")
@click.option("--repeat-count", type=click.IntRange(1), default=1, show_default=True,
              help="How many times each document is asked again in the query round.")
@click.option("--repeat-mode", type=click.Choice(["tile", "random", "interleave"]),
              default="tile", show_default=True,
              help="Order of the query round, as LMCache's Long-Doc-QA: tile repeats the "
                   "whole list (0 1 2 0 1 2), interleave each document back to back "
                   "(0 0 1 1 2 2), random shuffles them (seeded).")
@click.option("--in-flight", type=click.IntRange(1), default=4, show_default=True,
              help="Concurrent requests.")
@click.option("--adapter", "-a", help="Route every request to this adapter's component.")
@click.option("--session-per-document", is_flag=True,
              help="Open one sticky session per document so its repeats land on the same "
                   "instance (needs stateful sessions on the endpoint).")
@click.option("--region", envvar="AWS_DEFAULT_REGION",
              help="AWS region (default: the spec's, else the environment's).")
@click.option("--output", "output_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every request (start, TTFT, total, tokens, cache outcome: the "
                   "server's count of cached tokens where it sends one, else predicted) to "
                   "this file for lmikit simulate/plan --calibrate.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_cmd(target: str, num_documents: int, document_tokens: int, output_tokens: int,
              repeat_count: int, repeat_mode: str, in_flight: int, adapter: str | None,
              session_per_document: bool, region: str | None, output_path: Path | None,
              as_json: bool) -> None:
    """Run Long-Doc-QA against SPEC_OR_ENDPOINT (a spec file or an endpoint name).

    Rounds: pre-warmup, warmup (each document once: cache misses), query (documents again:
    hits). Every document starts with an id drawn for this run, so the warmup misses even
    where an earlier run's documents are still cached. Every request streams; TTFT is
    measured client-side, to the first generated token (answer text, reasoning or a tool
    call). A failed request or Ctrl-C stops the run after the requests in flight; --output
    still gets every request measured (marked "complete": false), and the command fails.
    """
    import secrets

    from lmikit.bench import BenchInterrupted, BenchResult, LongDocQA
    from lmikit.client import Endpoint
    from lmikit.errors import BenchStopped

    deployed = spec_or_endpoint(target, region)
    spec_path = deployed.spec_path
    planned = None
    if output_path is not None:  # the run takes minutes: refuse what would fail after it
        check_writable(output_path, "--output")
        if spec_path is not None:  # the file names the spec's model, instance and tiers
            from lmikit.accept import DEPLOY_TARGETS
            from lmikit.cli._common import load

            planned = load(spec_path, DEPLOY_TARGETS)  # a SageMaker endpoint is measured
    if deployed.spec is not None and adapter \
            and adapter not in {a.name for a in deployed.spec.adapters}:
        spec = deployed.spec
        raise click.BadParameter(f"{adapter!r} is not an adapter of {spec.name} "
                                 f"({', '.join(a.name for a in spec.adapters) or 'none'})",
                                 param_hint="--adapter")
    name = deployed.name
    workload = LongDocQA(num_documents=num_documents, document_tokens=document_tokens,
                         output_tokens=output_tokens, repeat_count=repeat_count,
                         repeat_mode=repeat_mode,  # type: ignore[arg-type] # click.Choice
                         in_flight=in_flight,
                         run_id=f"{secrets.token_hex(4)}-")  # cold caches for this run
    copies = before = sm = identity = None
    # one pooled connection per request in flight, and one for a session call beside them
    with Endpoint(name, region=deployed.region, max_tokens=output_tokens,
                  max_connections=max(10, in_flight + 1)) as ep:
        if output_path is not None:
            import boto3

            sm = boto3.Session(region_name=ep.region).client("sagemaker", region_name=ep.region)
            before = _serving_copies(ep, sm)
            if spec_path is None:  # the file must say what the endpoint runs
                identity = _identity(ep, sm)
        runner = _Runner(ep, workload, adapter, session_per_document)
        stopped: BenchStopped | BenchInterrupted | None = None
        try:
            result = runner.run()
        except (BenchStopped, BenchInterrupted) as exc:  # keep what was measured
            stopped, result = exc, BenchResult(workload, exc.rounds)
        finally:
            runner.close_sessions()
        if before is not None:  # the fit replays the bench on as many copies
            copies = _copies_during(name, before, _serving_copies(ep, sm))
    data = {"endpoint": name, "adapter": adapter, "sessions": runner.sessions_opened,
            **result.to_dict(), **({"stopped": result.stopped} if stopped else {})}
    if output_path is not None:
        _write_bench_file(output_path, result, spec_path, planned, copies,
                          session_per_document, identity, adapter)
    if as_json:
        echo_json(data)
    else:
        _print_table(result, name, adapter)
    if stopped is not None:  # the measurements are written: now fail
        if output_path is not None:
            click.echo(f"{output_path} holds the {result.measured} requests measured, marked "
                       '"complete": false', err=True)
        raise stopped


def _query_outcomes(spec: Any, spec_path: Path, workload: LongDocQA, mode: str,
                    copies: int | None, routing: str) -> list[dict[str, int]] | None:
    """Where each query request should find its document: the simulator's caches for the
    spec (the plan's capacities, LRU, the routing) fed the bench's rounds in its order."""
    from lmikit.errors import LmikitError
    from lmikit.sim import deployment_from_spec, expected_outcomes, long_doc_qa

    try:
        dep = deployment_from_spec(spec, spec_path.parent, instances=copies)
        work = long_doc_qa(workload.num_documents, workload.document_tokens,
                           workload.output_tokens, workload.in_flight, dep.chunk_size,
                           query_order=[d for d, _ in workload.query_prompts()])
        return expected_outcomes(dep, work, mode if mode in dep.tier_tokens else "off",
                                 routing)
    except LmikitError as exc:  # the measurements are kept, with their outcomes unknown
        click.echo(f"warning: cannot say which cache tier served each query request ({exc}); "
                   "the result file leaves them unknown and --calibrate fits on the warm-up "
                   "misses", err=True)
        return None


def _bench_routing(strategy: str, session_per_document: bool) -> str:
    """How the bench's requests are routed: a session per document pins it; without
    sessions a sticky-session endpoint routes each request by its variant strategy, which
    lmikit renders least-outstanding (:data:`lmikit.render.ROUTING`)."""
    if session_per_document:
        return "sticky_session"
    return "least_outstanding" if strategy == "sticky_session" else strategy


def _copies_during(name: str, before: int | None, after: int | None) -> int | None:
    """The copies a bench ran on, from the counts before and after it: a component scaled
    to zero has none before its first request; a count that changed is warned about."""
    counts = [c for c in (before, after) if c]
    if not counts:
        return None
    if before and after is not None and before != after:  # from zero: the first request's
        click.echo(f"warning: {name} went from {before} to {after} model copies during the "
                   f"bench; the result file records {max(counts)}, which --calibrate replays "
                   "it on", err=True)
    return max(counts)


def _serving_copies(ep: Endpoint, sm: Any) -> int | None:
    """Model copies serving ``ep`` now (0 while scaled to zero): its base component's
    current copy count, or for an endpoint without inference components its instances; None
    (with a warning) where the caller may not describe them. ``sm``: a SageMaker client."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        try:
            ic = sm.describe_inference_component(InferenceComponentName=ep.component)
            return int(ic["RuntimeConfig"]["CurrentCopyCount"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ValidationException":
                raise
        variants = sm.describe_endpoint(EndpointName=ep.name).get("ProductionVariants", [])
        return sum(int(v.get("CurrentInstanceCount", 0)) for v in variants)
    except (BotoCoreError, ClientError, KeyError) as exc:
        click.echo(f"warning: cannot read how many model copies serve {ep.name} ({exc}); "
                   "the result file leaves copies out and --calibrate replays it on the "
                   "simulated deployment's", err=True)
        return None


def _identity(ep: Endpoint, sm: Any) -> Identity:
    """What the endpoint's base component runs, with a warning for what cannot be read."""
    from lmikit.bench import endpoint_identity

    identity = endpoint_identity(sm, ep.name, ep.component)
    for problem in identity.problems:
        click.echo(f"warning: {problem}; the result file leaves it unknown, and --calibrate "
                   "refuses the file unless given --calibrate-anyway", err=True)
    return identity


def _write_bench_file(path: Path, result: BenchResult, spec_path: Path | None,
                      planned: tuple[Any, Any] | None, copies: int | None = None,
                      session_per_document: bool = False, identity: Identity | None = None,
                      adapter: str | None = None) -> None:
    """The calibration file. A spec target (``planned``: its spec and plan) names the
    model, instance and cache tier, and predicts each query request's cache outcome from
    the deployment's caches (which tier, if any: a client never sees it), which a server
    that counts cached tokens overrides (:func:`lmikit.bench.bench_file`); an endpoint name
    gives what the endpoint runs (``identity``) and leaves the outcomes unknown."""
    import json

    from lmikit.bench import bench_file

    meta: dict[str, object] = {"copies": copies, "adapter": adapter}
    if identity is not None:
        meta |= {"model": identity.model, "instance": identity.instance, "tp": identity.tp,
                 "kv_cache": identity.kv_cache, "chunk_size": identity.chunk_size or 256}
    if planned is not None and spec_path is not None:
        spec, plan = planned
        tier = {"none": "off"}.get(plan.tier, plan.tier)
        meta |= {"model": plan.model_id, "instance": plan.instance_type, "tp": plan.tp,
                 "chunk_size": spec.kv_cache.chunk_size, "kv_cache": tier,
                 "query_outcomes": _query_outcomes(
                     spec, spec_path, result.workload, tier, copies,
                     _bench_routing(spec.routing.strategy, session_per_document))}
    data = bench_file(result, **meta)  # type: ignore[arg-type]
    try:
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot write {str(path)!r}: {exc}",
                                 param_hint="--output") from exc


class _Runner:
    """Sends the workload's prompts through ``Endpoint.stream``; one session per document
    when asked. Sessions open lazily, so a document's warmup and query share one."""

    def __init__(self, ep: Endpoint, workload: LongDocQA, adapter: str | None,
                 session_per_document: bool) -> None:
        self.ep = ep
        self.workload = workload
        self.adapter = adapter
        self._doc_of = {p: d for d, p in workload.warmup_prompts()} if session_per_document \
            else {}
        self._sessions: dict[int, Session] = {}
        self._lock = threading.Lock()

    @property
    def sessions_opened(self) -> int:
        """NEW_SESSION calls made (a reopened, expired session counts again)."""
        with self._lock:
            return sum(len(s.history) for s in self._sessions.values())

    def _session(self, doc: int) -> Session:
        with self._lock:
            s = self._sessions.get(doc)
            if s is None:
                s = self._sessions[doc] = self.ep.session(adapter=self.adapter)
        return s

    def send(self, prompt: str) -> Measurement:
        from lmikit.bench import Measurement

        called = self.ep.clock.monotonic()
        body = self.ep.payload(prompt, stream=True, max_tokens=self.workload.output_tokens)
        body["temperature"] = 0
        doc = self._doc_of.get(prompt)
        if doc is None:
            stream = self.ep.stream(body, adapter=self.adapter)
        else:
            stream = self._session(doc).stream(body)
        for _ in stream:
            pass
        r = stream.result
        if r is None:  # pragma: no cover - set when the stream ends
            raise click.ClickException("a stream ended without a result")
        late = max(0.0, stream.started_at - called)  # a NEW_SESSION call went first
        excluded = None
        if r.retries:  # botocore's back-off is inside its timings
            excluded = (f"botocore retried it {r.retries} time(s) (throttled or a 5xx answer), "
                        "so its TTFT includes the back-off")
        if r.first_token_s is None:  # a stream of role and usage only: no TTFT to measure
            return Measurement(r.total_s, r.total_s, r.tokens, r.prompt_tokens, r.cached_tokens,
                               NO_TOKEN, late)
        return Measurement(r.first_token_s, r.total_s, r.tokens, r.prompt_tokens,
                           r.cached_tokens, excluded, late)

    def run(self) -> BenchResult:
        from lmikit.bench import run_long_doc_qa
        from lmikit.cli._common import progress_bar

        w = self.workload
        totals = {"pre-warmup": w.pre_warmup, "warmup": w.num_documents,
                  "query": len(w.query_prompts())}
        bar = progress_bar()
        if not bar.console.is_terminal:  # a log file or a pipe: lines, not a redrawn bar
            return run_long_doc_qa(w, self.send, on_done=progress_lines(totals))
        tasks = {name: bar.add_task(name, total=n) for name, n in totals.items() if n}

        def done(round_name: str, i: int, m: Measurement) -> None:
            bar.advance(tasks[round_name])

        with bar:
            return run_long_doc_qa(w, self.send, on_done=done)

    def close_sessions(self) -> None:
        """Close every session; best effort, so a failed close never hides the result."""
        from lmikit.errors import InvokeError

        with self._lock:
            sessions = list(self._sessions.values())
        for s in sessions:
            try:
                s.close()
            except InvokeError as exc:
                click.echo(f"warning: {exc}", err=True)


PROGRESS_STEPS = 10  # lines per round where no terminal shows the bar


def progress_lines(totals: dict[str, int],
                   clock: Any = time.monotonic) -> Any:
    """An ``on_done`` that prints one stderr line each time a tenth of a round's requests
    (and the last one) have finished: ``bench warmup: 14/46 requests done (31 s)``."""
    started = clock()

    def done(round_name: str, i: int, m: Measurement) -> None:
        total, count = totals[round_name], i + 1
        step = max(1, -(-total // PROGRESS_STEPS))  # ceil(total / 10)
        if count % step == 0 or count == total:
            click.echo(f"bench {round_name}: {count}/{total} requests done "
                       f"({clock() - started:.0f} s)", err=True)

    return done


def _print_table(result: BenchResult, endpoint: str, adapter: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    w = result.workload
    title = (f"Long-Doc-QA on {endpoint}" + (f" (adapter {adapter})" if adapter else "")
             + f": {w.num_documents} docs x {w.document_tokens} tokens, "
               f"{w.output_tokens} out, {w.repeat_mode} x{w.repeat_count}, "
               f"{w.in_flight} in flight")
    table = Table(title=title)
    for col in ("Round", "Requests", "Mean TTFT", "p90 TTFT", "Round time", "Output tokens"):
        table.add_column(col, justify="left" if col == "Round" else "right")
    for r in result.rounds:
        table.add_row(r.name, str(r.requests), _ms(r.mean_ttft_s), _ms(r.p90_ttft_s),
                      f"{r.round_time_s:.2f} s", str(r.output_tokens))
    console = Console()
    console.print(table)
    console.print(f"TTFT speedup, warmup over query: [bold]{result.ttft_speedup:.2f}x[/bold]")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"
