"""The start-up step the entrypoint runs before LMI: ``eval "$(python3 -m lmikit_runtime.start)"``.

It sizes LMCache for this host, fetches the Hugging Face token and the remote KV tier's
credentials, starts the metrics front (or the port-9400 sidecar) and the EMF emitter, and
prints ``export NAME=value`` lines on stdout for the wrapper to evaluate, so secrets travel
through a pipe into the server's environment only: never a file, never a log line (the
variables holding them are listed in ``LMIKIT_REDACT_ENV`` for :mod:`lmikit_runtime.logredact`,
and never given to the metrics front, sidecar or EMF emitter). Log lines go to stderr (the
container log).
Exit status 2 means the plan cannot fit this host, or the metrics front could not listen; the
log line says what to change. A bad ``LMIKIT_EMF`` only turns the EMF emitter off.

Background processes started here get the container log (stderr) as their stdout: never the
wrapper's ``$(...)`` pipe, which would keep the wrapper waiting for EOF and LMI from starting.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from lmikit_runtime.autoconfig import ConfigError, autoconfigure, runtime_plan_from_env
from lmikit_runtime.emf import EmfConfigError, load_table, parse_config
from lmikit_runtime.front import (
    DEFAULT_FRONT_PORT,
    DEFAULT_UPSTREAM_PORT,
    READY,
    FrontError,
    upstream_address,
)
from lmikit_runtime.hostfacts import Host
from lmikit_runtime.logredact import ENV as REDACT_ENV
from lmikit_runtime.secrets import (
    SecretError,
    fetch_hf_token,
    fetch_remote_credentials,
    url_with_credentials,
)

log = logging.getLogger("lmikit.start")
# LMCACHE_REMOTE_URL overrides the LMCache file's remote_url (LMCache 0.5.6
# lmcache_get_or_create_config: from_file, then update_config_from_env), so the credentials
# reach LMCache without being written into the file.
REMOTE_URL_ENV = "LMCACHE_REMOTE_URL"
SECRET_NAMES = frozenset({"HF_TOKEN", REMOTE_URL_ENV})
KV_CREDENTIALS_ENV = "LMIKIT_KV_REMOTE_CREDENTIALS_SECRET_ARN"
# LMCache's usage telemetry (lmcache/usage_telemetry, on unless LMCACHE_TRACK_USAGE=false)
# sends the engine's remote_url to stats.lmcache.ai over plain HTTP.
TRACK_USAGE_ENV = "LMCACHE_TRACK_USAGE"
FRONT_READY_TIMEOUT = 15.0
STDERR_FD = 2  # background processes log to the container log, never to the wrapper's pipe


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
    kv_arn = env.get(KV_CREDENTIALS_ENV)
    if kv_arn:
        exports.update(_remote_credentials(env, kv_arn, secrets_client))
    secret_vars = sorted(SECRET_NAMES & exports.keys())
    if secret_vars:
        exports[REDACT_ENV] = ",".join(secret_vars)
    if env.get("LMIKIT_METRICS_PATH") or env.get("LMIKIT_EMF"):
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


def _remote_credentials(env: Mapping[str, str], arn: str, client: Any) -> dict[str, str]:
    """``LMCACHE_REMOTE_URL``: the planned remote URL with the secret's credentials, for the
    LMI server's environment only."""
    plan = runtime_plan_from_env(env, env.get("LMIKIT_MODEL_DIR", "/opt/ml/model"))
    if plan.tier != "remote" or not plan.remote_url:
        log.info("remote KV credentials (%s) not used: this deployment has no remote tier "
                 "(tier %s)", arn, plan.tier)
        return {}
    credentials = fetch_remote_credentials(arn, client=client)
    url = url_with_credentials(plan.remote_url, credentials)
    if env.get(TRACK_USAGE_ENV, "false") != "false":
        log.warning("%s=%s replaced by false: LMCache's usage telemetry would send the remote "
                    "URL, credentials included", TRACK_USAGE_ENV, env[TRACK_USAGE_ENV])
    log.info("%s: %s with the %s user's password from Secrets Manager secret %s",
             REMOTE_URL_ENV, plan.remote_url, "named" if credentials.username else "default",
             arn)
    return {REMOTE_URL_ENV: url, TRACK_USAGE_ENV: "false"}


def _metrics(env: Mapping[str, str], exports: Mapping[str, str], runtime_dir: Path,
             spawn: Callable[..., Any]) -> dict[str, str]:
    multiproc = runtime_dir / "prometheus"
    shutil.rmtree(multiproc, ignore_errors=True)  # stale files from a previous start
    multiproc.mkdir(parents=True)
    child_env = {k: v for k, v in {**env, **exports}.items() if k not in SECRET_NAMES}
    child_env["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc)
    out = {"PROMETHEUS_MULTIPROC_DIR": str(multiproc)}
    if env.get("LMIKIT_METRICS_PATH"):
        front = env.get("LMIKIT_METRICS_FRONT", "true").lower() != "false"
        if front:
            out.update(_front(env, child_env, runtime_dir, spawn))
        if not front or env.get("LMIKIT_METRICS_PORT"):
            spawn([sys.executable, "-m", "lmikit_runtime.metrics"], env=child_env,
                  stdin=subprocess.DEVNULL, stdout=STDERR_FD, start_new_session=True)
            log.info("metrics sidecar: %s on port %s", env["LMIKIT_METRICS_PATH"],
                     env.get("LMIKIT_METRICS_PORT", "9400"))
    if env.get("LMIKIT_EMF"):
        _emf(env, child_env, spawn)
    return out


def _emf(env: Mapping[str, str], child_env: dict[str, str],
         spawn: Callable[..., Any]) -> None:
    """Start the EMF emitter (its own process: a slow collection or a crash never touches
    the front on port 8080). A bad LMIKIT_EMF only turns it off: metrics must not stop
    serving. Its lines go to the container log (stderr fd: SageMaker ships stdout and stderr
    to the same CloudWatch log stream), never to the wrapper's pipe."""
    try:
        config = parse_config(env["LMIKIT_EMF"], load_table(env.get("LMIKIT_EMF_TABLE")))
    except EmfConfigError as exc:
        log.warning("EMF emitter OFF: %s", exc)
        return
    proc = spawn([sys.executable, "-m", "lmikit_runtime.emf"], env=child_env,
                 stdin=subprocess.DEVNULL, stdout=STDERR_FD, start_new_session=True)
    log.info("EMF emitter: %s every %g s (pid %s)", config.namespace, config.interval_s,
             getattr(proc, "pid", None))


def _front(env: Mapping[str, str], child_env: dict[str, str], runtime_dir: Path,
           spawn: Callable[..., Any]) -> dict[str, str]:
    """Bind the front's port here (a taken port fails the start, before LMI), hand the
    listening socket to the front process, wait until it accepts, and move LMI behind it."""
    host = env.get("LMIKIT_FRONT_HOST") or "0.0.0.0"
    port = _port(env, "LMIKIT_FRONT_PORT", DEFAULT_FRONT_PORT)
    upstream = _port(env, "LMIKIT_UPSTREAM_PORT", DEFAULT_UPSTREAM_PORT)
    if upstream == port:
        raise FrontError(f"LMIKIT_UPSTREAM_PORT {upstream} is the front's own port; "
                         "pick another port for LMI (default 8081)")
    try:
        sock = socket.create_server((host, port), backlog=1024)
    except OSError as exc:
        raise FrontError(
            f"metrics front cannot listen on {host}:{port}: {exc.strerror or exc}. Another "
            "process owns the port; free it, set LMIKIT_FRONT_PORT, or set "
            "LMIKIT_METRICS_FRONT=false to leave LMI on its own port") from exc
    read_fd, write_fd = os.pipe()
    try:
        child_env.update(LMIKIT_FRONT_FD=str(sock.fileno()), LMIKIT_FRONT_READY_FD=str(write_fd),
                         LMIKIT_UPSTREAM_PORT=str(upstream))
        proc = spawn([sys.executable, "-m", "lmikit_runtime.front"], env=child_env,
                     stdin=subprocess.DEVNULL, stdout=STDERR_FD,
                     start_new_session=True, pass_fds=(sock.fileno(), write_fd))
    finally:
        sock.close()  # the front holds its own copy
        os.close(write_fd)
    try:
        ready = _read_ready(read_fd, FRONT_READY_TIMEOUT)
    finally:
        os.close(read_fd)
    if ready != READY:
        why = "exited" if ready == b"" else "did not report ready"
        if hasattr(proc, "kill") and ready != b"":
            proc.kill()
        raise FrontError(f"metrics front {why} within {FRONT_READY_TIMEOUT:.0f} s "
                         "(its log lines above say why); not starting LMI")
    pid = getattr(proc, "pid", None)
    if pid is not None:
        (runtime_dir / "front.pid").write_text(f"{pid}\n")
    address = upstream_address(upstream)
    if env.get("SERVING_INFERENCE_ADDRESS") not in (None, address):
        log.warning("SERVING_INFERENCE_ADDRESS=%s replaced by %s (the front owns port %d)",
                    env["SERVING_INFERENCE_ADDRESS"], address, port)
    log.info("metrics front: %s on %s:%d (pid %s); LMI moved to %s", env["LMIKIT_METRICS_PATH"],
             host, port, pid, address)
    # management too: the image's config.properties binds both to 0.0.0.0:8080, and the
    # same address for both makes djl-serving open one listener for both.
    return {"SERVING_INFERENCE_ADDRESS": address, "SERVING_MANAGEMENT_ADDRESS": address}


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or str(default)
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise FrontError(f"{name}={raw!r} is not a TCP port (1-65535)")
    return port


def _read_ready(fd: int, timeout: float) -> bytes:
    """What the front writes on its ready pipe: READY, or b"" when it exits first."""
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data or b"timeout"
        chunk = os.read(fd, 64)
        if not chunk:
            return data
        data += chunk
    return data


def render_exports(exports: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(exports.items()))


def main(env: Mapping[str, str] | None = None, stdout: TextIO | None = None, **kwargs: Any) -> int:
    logging.basicConfig(level=logging.INFO, format="lmikit-start: %(message)s",
                        stream=sys.stderr)
    env = os.environ if env is None else env
    try:
        exports = start(env, **kwargs)
    except (ConfigError, SecretError, FrontError) as exc:
        log.error("ERROR: %s", exc)
        return 2
    (stdout or sys.stdout).write(render_exports(exports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
