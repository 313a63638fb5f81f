"""``lmikit sandbox``: a local fake SageMaker (plus moto) to try every command offline."""

from __future__ import annotations

import click


@click.group("sandbox")
def sandbox_group() -> None:
    """Run a local fake SageMaker (and moto for S3/IAM/STS/CloudWatch)."""


@sandbox_group.command("serve")
@click.option("--port", type=click.IntRange(1, 65534), default=4566, show_default=True,
              help="Port of the fake SageMaker; moto listens on PORT+1.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--region", default="us-east-1", show_default=True)
def serve_cmd(port: int, host: str, region: str) -> None:
    """Serve until Ctrl-C and print the environment that points boto3 at it."""
    import time

    from lmikit.testing._server import SandboxError, start_sandbox

    try:
        sandbox = start_sandbox(host, port, region=region)
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"lmikit sandbox: fake SageMaker on http://{host}:{sandbox.port}, moto on "
               f"http://{host}:{sandbox.moto_port}")
    click.echo("Point boto3 and the lmikit CLI at it (in another shell):\n")
    for k, v in sandbox.env().items():
        click.echo(f"export {k}={v}")
    click.echo("\nPress Ctrl-C to stop.")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        click.echo("Stopping the sandbox.")
    finally:
        sandbox.stop()
