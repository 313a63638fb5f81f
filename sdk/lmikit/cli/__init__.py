"""The ``lmikit`` command line. It parses, calls the library and prints.

Subcommands live in their own modules and are imported only when run, so ``lmikit --help``
stays fast. Every :class:`~lmikit.errors.LmikitError` is printed as ``Kind: message`` with a
non-zero exit code, and so is a package a command needs that is not installed (the extra
that adds it, :mod:`lmikit._extras`); no traceback reaches the user.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click

# name -> (module:attribute, one-line help shown by --help without importing the module)
COMMANDS: dict[str, tuple[str, str]] = {
    "advise": ("lmikit.cli._advise:advise_cmd",
               "The cheapest deployment meeting a latency target, for a workload."),
    "plan": ("lmikit.cli._plan:plan_cmd", "Size the KV cache tiers and predict TTFT."),
    "render": ("lmikit.cli._render:render_cmd", "Print a rendered target (lmcache, env, ...)."),
    "validate": ("lmikit.cli._spec:validate_cmd",
                 "Check a spec: schema, plan, adapters, every render target."),
    "schema": ("lmikit.cli._spec:schema_cmd", "Print the spec's JSON Schema."),
    "deploy": ("lmikit.cli._deploy:deploy_cmd", "Create or update the deployment (boto3)."),
    "destroy": ("lmikit.cli._deploy:destroy_cmd", "Delete the deployment's resources."),
    "gc": ("lmikit.cli._deploy:gc_cmd", "Delete configs and artifacts nothing uses."),
    "status": ("lmikit.cli._deploy:status_cmd", "Show every resource and its state."),
    "doctor": ("lmikit.cli._doctor:doctor_cmd",
               "Check a live deployment: drift, health, whether the cache pays."),
    "adapters": ("lmikit.cli._adapters:adapters_group", "Register and manage LoRA adapters."),
    "invoke": ("lmikit.cli._invoke:invoke_cmd", "Stream a prompt and print TTFT."),
    "bench": ("lmikit.cli._bench:bench_cmd", "Run the Long-Doc-QA TTFT benchmark."),
    "sandbox": ("lmikit.cli._sandbox:sandbox_group", "Run a local fake SageMaker."),
    "prices": ("lmikit.cli._prices:prices_group",
               "On-demand prices: read AWS's price list, show what is used."),
    "simulate": ("lmikit.cli._simulate:simulate_cmd",
                 "Simulate a workload: TTFT, hit rates, cost per routing x cache."),
    "weights": ("lmikit.cli._weights:weights_group", "Stage Hub weights in S3 for SageMaker."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target[0].split(":")
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                _exit_missing(exc, f"lmikit {cmd_name}")
            raise click.UsageError(f"'{cmd_name}' is not available in this build") from None
        cmd: click.Command = getattr(mod, attr)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from lmikit.errors import LmikitError

        try:
            return super().invoke(ctx)
        except LmikitError as exc:
            click.echo(f"{exc.kind}: {exc}", err=True)
            sys.exit(130 if exc.kind == "Interrupted" else 2)
        except ModuleNotFoundError as exc:
            _exit_missing(exc, f"lmikit {ctx.invoked_subcommand or ''}".rstrip())
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)


def _exit_missing(exc: ModuleNotFoundError, command: str) -> NoReturn:
    """Print the one line naming the package ``command`` needs and exit 2; an lmikit
    module that is missing is a broken install or a bug, and keeps its traceback."""
    from lmikit._extras import missing_package

    if (exc.name or "").split(".")[0] in ("lmikit", "lmikit_cdk", ""):
        raise exc
    error = missing_package(exc, command)
    click.echo(f"{error.kind}: {error}", err=True)
    sys.exit(2)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lmikit", prog_name="lmikit")
def main() -> None:
    """LMCache-enabled LLM serving on Amazon SageMaker from one YAML spec."""


if __name__ == "__main__":  # pragma: no cover
    main()
