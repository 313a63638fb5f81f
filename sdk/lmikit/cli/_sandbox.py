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
@click.option("--training-plan", "plans", multiple=True, metavar="ARN=TYPE",
              callback=lambda _ctx, param, values: [parse_training_plan(v, param)
                                                    for v in values],
              help="A training plan reserved for endpoints, for specs that set "
              "instance.capacity_reservation_arn, e.g. arn:aws:sagemaker:us-east-1:"
              "111122223333:training-plan/p5e-endpoints=ml.p5e.48xlarge (repeatable).")
def serve_cmd(port: int, host: str, region: str, plans: list[tuple[str, str]]) -> None:
    """Serve until Ctrl-C and print the environment that points boto3 at it."""
    import time

    from lmikit.testing._server import SandboxError, start_sandbox

    try:
        sandbox = start_sandbox(host, port, region=region)
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"lmikit sandbox: fake SageMaker on http://{host}:{sandbox.port}, moto on "
               f"http://{host}:{sandbox.moto_port}")
    for arn, instance_type in plans:
        sandbox.fake.add_training_plan(arn, instance_type)
        click.echo(f"Training plan {arn} reserves {instance_type} for endpoints.")
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


def parse_training_plan(value: str, param: click.Parameter | None = None) -> tuple[str, str]:
    """``ARN=TYPE`` -> (ARN, TYPE), each checked as the spec checks it.

    >>> plan = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p"
    >>> parse_training_plan(plan + "=ml.p5e.48xlarge") == (plan, "ml.p5e.48xlarge")
    True
    """
    import re

    from lmikit.catalog import TRAINING_PLAN_TYPES
    from lmikit.spec import INSTANCE_TYPE_PATTERN, RESERVATION_ARN_PATTERN

    arn, sep, instance_type = value.rpartition("=")
    problems = []
    if not sep or not re.match(RESERVATION_ARN_PATTERN, arn) or not 20 <= len(arn) <= 258:
        problems.append(f"{arn or value!r} is not a training plan ARN "
                        "(arn:aws:sagemaker:<region>:<account>:training-plan/<name>)")
    if not re.match(INSTANCE_TYPE_PATTERN, instance_type):
        problems.append(f"{instance_type!r} is not an instance type (such as ml.p5e.48xlarge)")
    elif instance_type not in TRAINING_PLAN_TYPES:
        problems.append(f"a training plan cannot reserve {instance_type}; it reserves "
                        f"{', '.join(sorted(TRAINING_PLAN_TYPES))}")
    if problems:
        raise click.BadParameter(f"{value!r}: " + "; ".join(problems) + "; give ARN=TYPE",
                                 param=param)
    return arn, instance_type
