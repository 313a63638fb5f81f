"""The start-up step the entrypoint runs before LMI: ``eval "$(python3 -m lmikit_runtime.start)"``.

It sizes LMCache for this host, fetches the Hugging Face token, starts the metrics sidecar
and prints ``export NAME=value`` lines on stdout for the wrapper to evaluate, so the token
travels through a pipe into the server's environment only: never a file, never a log line.
Log lines go to stderr (the container log). Exit status 2 means the plan cannot fit this
host; the log line says what to change.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from lmikit_runtime.autoconfig import ConfigError, autoconfigure, runtime_plan_from_env
from lmikit_runtime.hostfacts import Host
from lmikit_runtime.secrets import SecretError, fetch_hf_token

log = logging.getLogger("lmikit.start")
SECRET_NAMES = frozenset({"HF_TOKEN"})


def start(env: Mapping[str, str], *, host: Host | None = None, secrets_client: Any = None,
          spawn: Callable[..., Any] | None = None) -> dict[str, str]:
    """Do the start-up work; return the variables to export to the server."""
    exports: dict[str, str] = {}
    runtime_dir = Path(env.get("LMIKIT_RUNTIME_DIR", "/tmp/lmikit"))
    runtime_dir.mkdir(parents=True, exist_ok=True)
    if env.get("LMIKIT_AUTOCONFIG", "true").lower() != "false":
        exports.update(_lmcache(env, host or Host(env=env), runtime_dir))
    arn = env.get("LMIKIT_HF_TOKEN_SECRET_ARN")
    if arn:
        exports["HF_TOKEN"] = fetch_hf_token(arn, client=secrets_client)
        log.info("HF_TOKEN: read from Secrets Manager secret %s", arn)
    metrics_path = env.get("LMIKIT_METRICS_PATH")
    if metrics_path:
        exports.update(_metrics(env, exports, runtime_dir, spawn or subprocess.Popen))
    return exports


def _lmcache(env: Mapping[str, str], host: Host, runtime_dir: Path) -> dict[str, str]:
    plan = runtime_plan_from_env(env, env.get("LMIKIT_MODEL_DIR", "/opt/ml/model"))
    facts = host.facts(plan.disk_path if plan.tier == "cpu+disk" else None)
    config_path = str(runtime_dir / "lmcache_config.yaml")
    cfg = autoconfigure(plan, facts, config_path)
    for line in cfg.log:
        log.info("%s", line)
    if cfg.lmcache:
        import yaml
        Path(config_path).write_text("# written by lmikit at container start\n"
                                     + yaml.safe_dump(cfg.lmcache, sort_keys=True))
        local_disk = cfg.lmcache.get("local_disk")
        if local_disk:
            Path(local_disk[len("file://"):]).mkdir(parents=True, exist_ok=True)
    return cfg.env


def _metrics(env: Mapping[str, str], exports: Mapping[str, str], runtime_dir: Path,
             spawn: Callable[..., Any]) -> dict[str, str]:
    multiproc = runtime_dir / "prometheus"
    shutil.rmtree(multiproc, ignore_errors=True)  # stale files from a previous start
    multiproc.mkdir(parents=True)
    child_env = {k: v for k, v in {**env, **exports}.items() if k not in SECRET_NAMES}
    child_env["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc)
    spawn([sys.executable, "-m", "lmikit_runtime.metrics"], env=child_env,
          stdin=subprocess.DEVNULL, start_new_session=True)
    log.info("metrics sidecar: %s on port %s", env["LMIKIT_METRICS_PATH"],
             env.get("LMIKIT_METRICS_PORT", "9400"))
    return {"PROMETHEUS_MULTIPROC_DIR": str(multiproc)}


def render_exports(exports: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(exports.items()))


def main(env: Mapping[str, str] | None = None, stdout: TextIO | None = None, **kwargs: Any) -> int:
    logging.basicConfig(level=logging.INFO, format="lmikit-start: %(message)s",
                        stream=sys.stderr)
    env = os.environ if env is None else env
    try:
        exports = start(env, **kwargs)
    except (ConfigError, SecretError) as exc:
        log.error("ERROR: %s", exc)
        return 2
    (stdout or sys.stdout).write(render_exports(exports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
