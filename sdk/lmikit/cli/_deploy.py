"""``lmikit deploy | destroy | gc | status``: the boto3 deployer, with live progress."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from lmikit.cli._common import spec_argument

DONE_STATES = {"InService", "Failed", "created", "deleted", "exists", "done", "unchanged",
               "rolled back"}
POLL = float(os.environ.get("LMIKIT_POLL_SECONDS", "15"))

role_option = click.option("--role-arn", envvar="LMIKIT_ROLE_ARN",
                           help="SageMaker execution role ARN (env LMIKIT_ROLE_ARN).")
bucket_option = click.option("--bucket", envvar="LMIKIT_BUCKET",
                             help="S3 bucket for artifacts [default: the deployed endpoint's, "
                             "else sagemaker-<region>-<account>, created if missing].")
poll_option = click.option("--poll-seconds", type=click.FloatRange(0.1), default=POLL,
                           show_default=True, help="How often to poll resource status.")
unlock_option = click.option("--force-unlock", is_flag=True,
                             help="Take the deployment's lease even if another run holds it "
                             "(only when that run is gone).")


class ProgressTable:
    """A live rich table: one row per resource with action, status and elapsed time, and
    the whole run's elapsed time in the title. It is re-rendered on every refresh, so the
    times advance while a resource is still being waited for. Without a terminal (a log
    file, CI) it prints a line each time a resource's action or status changes instead."""

    def __init__(self, title: str, clock: Callable[[], float] = time.monotonic) -> None:
        from rich.console import Console

        self.console = Console()
        self.title = title
        self.clock = clock
        self.started = clock()
        self.ended: float | None = None
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.live: Any = None

    def __call__(self, event: Any) -> None:
        at = event.at or self.clock()
        with self.lock:
            key = (event.kind, event.name)
            row = self.rows.setdefault(key, {"start": at})
            changed = (row.get("action"), row.get("status")) != (event.action, event.status)
            row.update(action=event.action, status=event.status)
            settled = event.status in DONE_STATES or event.action == "unchanged"
            row["end"] = at if settled else None
            if changed and not self.console.is_terminal and event.action != "unchanged":
                click.echo(f"{event.kind} {event.name}: {event.action} {event.status} "
                           f"({at - self.started:.0f} s)")

    def elapsed(self, key: tuple[str, str]) -> float:
        row = self.rows[key]
        end = row.get("end")
        return (end if end is not None else self.ended or self.clock()) - row["start"]

    def render(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        with self.lock:
            if not self.rows:  # nothing happened yet (or the run stopped before any step)
                return Text("")
            total = (self.ended or self.clock()) - self.started
            t = Table(title=f"{self.title} ({total:.0f}s)", title_justify="left")
            for col in ("Resource", "Name", "Action", "Status", "Elapsed"):
                t.add_column(col)
            for key, row in self.rows.items():
                status = row["status"]
                style = {"InService": "green", "Failed": "red", "deleted": "dim"}.get(status,
                                                                                      "")
                t.add_row(key[0], key[1], row["action"],
                          f"[{style}]{status}[/]" if style else status,
                          f"{self.elapsed(key):.0f}s")
        return t

    def __enter__(self) -> ProgressTable:
        from rich.live import Live

        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=4, transient=False,
                             get_renderable=self.render)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.ended = self.clock()
        if self.live is not None:
            self.live.refresh()
            self.live.__exit__(*exc)
            self.live = None


def _deployment(spec_path: Path, role_arn: str | None, bucket: str | None, poll: float,
                progress: Any, targets: tuple[str, ...] = (), **options: Any) -> Any:
    from lmikit.cli._common import load
    from lmikit.deploy import Deployment

    spec, plan = load(spec_path, targets)  # destroy and status need only the names
    if targets:
        from lmikit.render import capacity_warning

        problem = capacity_warning(spec)
        if problem:  # before anything is created: the endpoint may never start
            click.echo(f"Warning: {problem}", err=True)
    return Deployment(spec, role_arn=role_arn, bucket=bucket, base_dir=spec_path.parent,
                      plan=plan, progress=progress or (lambda event: None), poll_seconds=poll,
                      spec_path=str(spec_path), **options)


def _echo_changes(title: str, changes: list[Any]) -> None:
    click.echo(title)
    for c in changes:
        if c.action not in ("unchanged", "exists"):
            click.echo(f"  {c.line()}")
    if all(c.action in ("unchanged", "exists", "kept") for c in changes):
        click.echo("  nothing: every resource already matches the spec")


@click.command("deploy")
@spec_argument
@role_option
@bucket_option
@click.option("--create-role", is_flag=True,
              help="Create (or update) the least-privilege role lmikit-<name>-execution if "
              "--role-arn is not given; destroy deletes it.")
@click.option("--dry-run", is_flag=True,
              help="Print what would be created, updated or deleted; change nothing.")
@click.option("--keep-unlisted-adapters", is_flag=True,
              help="Keep adapters the spec listed before and no longer lists (default: "
              "remove them).")
@click.option("--prune", is_flag=True,
              help="Remove every adapter the spec does not list, those registered with "
              "`lmikit adapters` too (default: keep those).")
@unlock_option
@poll_option
def deploy_cmd(spec: Path, role_arn: str | None, bucket: str | None, create_role: bool,
               dry_run: bool, keep_unlisted_adapters: bool, prune: bool, force_unlock: bool,
               poll_seconds: float) -> None:
    """Converge SPEC's deployment on the spec; undo this run if it fails.

    Adapters registered with `lmikit adapters` are kept (the plan says so); `lmikit adapters
    adopt NAME --spec SPEC` puts one the spec lists under the spec."""
    from lmikit.accept import DEPLOY_TARGETS

    if prune and keep_unlisted_adapters:
        raise click.UsageError("--prune removes the adapters --keep-unlisted-adapters keeps: "
                               "choose one")
    progress = ProgressTable(f"lmikit deploy {spec}")
    d = _deployment(spec, role_arn, bucket, poll_seconds, progress, DEPLOY_TARGETS,
                    keep_unlisted_adapters=keep_unlisted_adapters, prune=prune,
                    force_unlock=force_unlock, create_role=create_role)
    if dry_run:
        _echo_changes(f"Plan for {d.spec.name} in {d.spec.region} (dry run, nothing changed):",
                      d.plan_changes())
        return
    d.on_plan = lambda changes: _echo_changes(f"Plan for {d.spec.name} in {d.spec.region}:",
                                              changes)
    with d.interrupts.sigint(lambda line: click.echo(line, err=True)), progress:
        result = d.deploy()
    if d.create_role:
        click.echo(f"Execution role: {d.role_arn}")
    click.echo(result.summary())


@click.command("destroy")
@spec_argument
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--keep-artifacts", is_flag=True,
              help="Keep the deployment's S3 artifacts (default: delete them).")
@bucket_option
@unlock_option
@poll_option
def destroy_cmd(spec: Path, yes: bool, keep_artifacts: bool, bucket: str | None,
                force_unlock: bool, poll_seconds: float) -> None:
    """Delete SPEC's scaling, adapters, base component, endpoint, configs, Models, dashboard,
    alarms, execution role and artifacts."""
    progress = ProgressTable(f"lmikit destroy {spec}")
    d = _deployment(spec, None, bucket, poll_seconds, progress, force_unlock=force_unlock)
    if not yes:
        click.confirm(f"Delete every resource of deployment {d.spec.name!r} in "
                      f"{d.spec.region}?", abort=True)
    with d.interrupts.sigint(lambda line: click.echo(line, err=True)), progress:
        result = d.destroy(keep_artifacts=keep_artifacts)
    gone = [f"{c.kind} {c.name}" for c in result.changes if c.action == "delete"]
    click.echo(listed("Deleted", gone, "nothing (already absent)"))
    for note in result.notes:
        click.echo(note)


@click.command("gc")
@spec_argument
@bucket_option
@unlock_option
@click.option("--dry-run", is_flag=True, help="Print what would be deleted; delete nothing.")
def gc_cmd(spec: Path, bucket: str | None, force_unlock: bool, dry_run: bool) -> None:
    """Delete SPEC's configs, Models and artifacts that nothing live uses any more."""
    d = _deployment(spec, None, bucket, POLL, None, force_unlock=force_unlock)
    if dry_run:
        changes = d.garbage()
    else:
        with d.interrupts.sigint(lambda line: click.echo(line, err=True)):
            result = d.gc()
        changes = result.changes
        for note in result.notes:
            click.echo(note)
    click.echo(listed("Would delete" if dry_run else "Deleted",
                      [f"{c.kind} {c.name}" for c in changes], "nothing (nothing unused)"))


def listed(head: str, items: list[str], none: str) -> str:
    """``head`` and one item a line (readable in a log, unlike one line of them all), or
    ``head: none``.

    >>> print(listed("Deleted", ["endpoint docqa", "alarm a"], "nothing"))
    Deleted (2):
      endpoint docqa
      alarm a
    """
    if not items:
        return f"{head}: {none}"
    return "\n".join([f"{head} ({len(items)}):", *(f"  {item}" for item in items)])


@click.command("status")
@spec_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(spec: Path, as_json: bool) -> None:
    """Show every resource of SPEC's deployment and its state."""
    d = _deployment(spec, None, None, POLL, None)
    rows = d.status()
    if as_json:
        from dataclasses import asdict

        from lmikit.cli._common import echo_json

        echo_json([asdict(r) for r in rows])
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"lmikit status: {d.spec.name} ({d.spec.region})", title_justify="left")
    for col in ("Resource", "Name", "Status", "Detail"):
        t.add_column(col)
    for r in rows:
        color = {"InService": "green", "Failed": "red", "absent": "dim"}.get(r.status, "yellow")
        t.add_row(r.kind, r.name, f"[{color}]{r.status}[/]", r.detail)
    Console().print(t)
