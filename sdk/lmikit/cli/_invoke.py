"""``lmikit invoke``: stream a prompt to the terminal and print TTFT."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from lmikit.errors import LmikitError

if TYPE_CHECKING:
    from lmikit.client import TokenStream


@click.command("invoke")
@click.argument("target", metavar="SPEC_OR_ENDPOINT")
@click.argument("prompt")
@click.option("--adapter", "-a", help="Route to this adapter's component.")
@click.option("--session", "use_session", is_flag=True,
              help="Open a sticky session for the call (and close it after).")
@click.option("--prefix-id", help="PrefixAwareId for prefix-aware routing.")
@click.option("--max-tokens", type=click.IntRange(1), default=256, show_default=True,
              help="Most tokens to generate for the answer.")
@click.option("--publish-metrics", is_flag=True,
              help="Also send TTFT and tokens/s to CloudWatch (LMIKit/Client).")
@click.option("--region", envvar="AWS_DEFAULT_REGION",
              help="AWS region (default: the spec's, else the environment's).")
def invoke_cmd(target: str, prompt: str, adapter: str | None, use_session: bool,
               prefix_id: str | None, max_tokens: int, publish_metrics: bool,
               region: str | None) -> None:
    """Stream PROMPT from SPEC_OR_ENDPOINT (a spec file, whose endpoint and region are
    used, or an endpoint name); print TTFT, total time and tokens/s."""
    from lmikit.cli._common import spec_or_endpoint
    from lmikit.client import Endpoint

    deployed = spec_or_endpoint(target, region)
    with Endpoint(deployed.name, region=deployed.region, max_tokens=max_tokens,
                  publish_metrics=publish_metrics) as ep:
        if use_session:
            with ep.session(adapter=adapter) as s:
                click.echo(f"(session {s.id})", err=True)
                _print(s.stream(prompt, prefix_id=prefix_id))
        else:
            _print(ep.stream(prompt, adapter=adapter, prefix_id=prefix_id))
    if ep.publisher is not None:
        from lmikit.metric_catalog import CLIENT_NAMESPACE

        pub = ep.publisher
        click.echo(f"published {pub.sent_datums} datums to {CLIENT_NAMESPACE}"
                   + (f" ({pub.failed_calls} PutMetricData calls failed)"
                      if pub.failed_calls else ""), err=True)


def _print(stream: TokenStream) -> None:
    printed = False
    try:
        for piece in stream:
            click.echo(piece, nl=False)
            printed = True
    except LmikitError:  # a stream that breaks partway: end the line, then the error
        if printed:
            click.echo()
        raise
    click.echo()
    r = stream.result
    if r is None:  # pragma: no cover - set when the stream ends
        return
    tps = f"{r.tokens_per_s:.1f} tok/s" if r.tokens_per_s else "n/a"
    ttft = f"{r.ttft_s * 1000:.0f} ms" if r.ttft_s is not None else "n/a"
    click.echo(f"TTFT {ttft} | total {r.total_s:.2f} s | {r.tokens} tokens | {tps} "
               f"| {r.component}", err=True)
