"""``lmikit deploy | destroy | status``: the boto3 deployer, with per-resource progress."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import click

from lmikit.cli._common import spec_argument

DONE_STATES = {"InService", "Failed", "created", "deleted", "exists"}
POLL = float(os.environ.get("LMIKIT_POLL_SECONDS", "15"))

role_option = click.option("--role-arn", envvar="LMIKIT_ROLE_ARN",
                           help="SageMaker execution role ARN (env LMIKIT_ROLE_ARN).")
bucket_option = click.option("--bucket", envvar="LMIKIT_BUCKET",
                             help="S3 bucket for artifacts [default: sagemaker-<region>-"
                             "<account>, created if missing].")
poll_option = click.option("--poll-seconds", type=click.FloatRange(0.1), default=POLL,
                           show_default=True, help="How often to poll resource status.")


class ProgressTable:
    """A live rich table: one row per resource with action, status and elapsed time."""

    def __init__(self, title: str) -> None:
        from rich.console import Console

        self.console = Console()
        self.title = title
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.live: Any = None

    def __call__(self, event: Any) -> None:
        with self.lock:
            key = (event.kind, event.name)
            row = self.rows.setdefault(key, {"start": time.monotonic()})
            row.update(action=event.action, status=event.status)
            settled = event.status in DONE_STATES or event.action == "unchanged"
            row["end"] = time.monotonic() if settled else None
            if self.live is not None:
                self.live.update(self.render())

    def render(self) -> Any:
        from rich.table import Table

        t = Table(title=self.title, title_justify="left")
        for col in ("Resource", "Name", "Action", "Status", "Elapsed"):
            t.add_column(col)
        for (kind, name), row in self.rows.items():
            status = row["status"]
            style = {"InService": "green", "Failed": "red", "deleted": "dim"}.get(status, "")
            t.add_row(kind, name, row["action"], f"[{style}]{status}[/]" if style else status,
                      f"{(row.get('end') or time.monotonic()) - row['start']:.0f}s")
        return t

    def __enter__(self) -> ProgressTable:
        from rich.live import Live

        self.live = Live(self.render(), console=self.console, refresh_per_second=4,
                         transient=False)
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            self.live.update(self.render())
        self.live.__exit__(*exc)
        self.live = None
        if not self.console.is_terminal:
            self.console.line()


def _deployment(spec_path: Path, role_arn: str | None, bucket: str | None, poll: float,
                progress: Any, create_role: bool = False, targets: tuple[str, ...] = ()) -> Any:
    from lmikit.cli._common import load
    from lmikit.deploy import Deployment, ensure_execution_role

    spec, plan = load(spec_path, targets)  # destroy and status need only the names
    d = Deployment(spec, role_arn=role_arn, bucket=bucket, base_dir=spec_path.parent,
                   plan=plan, progress=progress or (lambda event: None), poll_seconds=poll)
    if create_role and not role_arn:
        d.role_arn = ensure_execution_role(spec, d.bucket, session=d.clients.session,
                                           image_uri=d.image_uri)
        click.echo(f"Execution role: {d.role_arn}")
    return d


@click.command("deploy")
@spec_argument
@role_option
@bucket_option
@click.option("--create-role", is_flag=True,
              help="Create a least-privilege execution role if --role-arn is not given.")
@poll_option
def deploy_cmd(spec: Path, role_arn: str | None, bucket: str | None, create_role: bool,
               poll_seconds: float) -> None:
    """Create or update SPEC's endpoint idempotently; roll back this run on failure."""
    progress = ProgressTable(f"lmikit deploy {spec}")
    from lmikit.accept import DEPLOY_TARGETS

    d = _deployment(spec, role_arn, bucket, poll_seconds, progress, create_role,
                    DEPLOY_TARGETS)
    with progress:
        result = d.deploy()
    click.echo(result.summary())


@click.command("destroy")
@spec_argument
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@poll_option
def destroy_cmd(spec: Path, yes: bool, poll_seconds: float) -> None:
    """Delete SPEC's adapters, base component, endpoint and configs (in that order)."""
    progress = ProgressTable(f"lmikit destroy {spec}")
    d = _deployment(spec, None, "unused", poll_seconds, progress)
    if not yes:
        click.confirm(f"Delete every resource of deployment {d.spec.name!r}?", abort=True)
    with progress:
        result = d.destroy()
    gone = [f"{c.kind} {c.name}" for c in result.changes if c.action == "delete"]
    click.echo("Deleted: " + (", ".join(gone) if gone else "nothing (already absent)"))


@click.command("status")
@spec_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(spec: Path, as_json: bool) -> None:
    """Show every resource of SPEC's deployment and its state."""
    d = _deployment(spec, None, "unused", POLL, None)
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
