"""The remote KV tier's credentials: read from Secrets Manager at start, handed to LMCache in
the form it reads (``LMCACHE_REMOTE_URL`` with user info), never in a file or a log line.

Checked against LMCache 0.5.6's own config loader (``LMCacheEngineConfig.from_file`` then
``update_config_from_env``, the two calls ``lmcache_get_or_create_config`` makes), its own
URL parser's view (urllib, as ``parse_remote_url``) and redis-py's ``parse_url`` (what
``redis.ConnectionPool.from_url`` in LMCache's RedisConnector uses).
"""

from __future__ import annotations

import doctest
import io
import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from lmikit_runtime import logredact, secrets
from lmikit_runtime.secrets import (
    RemoteCredentials,
    SecretError,
    fetch_remote_credentials,
    url_with_credentials,
)
from lmikit_runtime.start import KV_CREDENTIALS_ENV, main

from tests.container.test_start import FakeSecrets, FakeSpawn, _host, _parse

KV_ARN = "arn:aws-us-gov:secretsmanager:us-gov-west-1:111122223333:secret:kv-redis-AbCdEf"
PASSWORD = "S3ntinel-p@ss:w/rd?#%+ &"  # every URL-special character
USER = "cache-user"
REMOTE = "rediss://cache.internal:6380/0"
CONTAINER = Path(__file__).resolve().parents[2] / "container"


def _remote_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    plan = {"tier": "remote", "weight_bytes": 16 * 10**9, "tp": 1, "remote_url": REMOTE}
    return {"LMIKIT_RUNTIME_DIR": str(tmp_path / "rt"), "LMIKIT_MODEL_DIR": str(tmp_path),
            "LMIKIT_PLAN": json.dumps(plan), KV_CREDENTIALS_ENV: KV_ARN, **extra}


def _secret(username: str | None = USER, password: str = PASSWORD) -> FakeSecrets:
    body = {"password": password} | ({"username": username} if username is not None else {})
    return FakeSecrets({"SecretString": json.dumps(body)})


def _start(tmp_path: Path, client: FakeSecrets, caplog: pytest.LogCaptureFixture,
           **extra: str) -> tuple[int, dict[str, str]]:
    out = io.StringIO()
    with caplog.at_level(logging.DEBUG):
        code = main(_remote_env(tmp_path, **extra), stdout=out, host=_host(tmp_path),
                    secrets_client=client)
    return code, _parse(out.getvalue())


def _files_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_start_exports_credentials_in_lmcache_remote_url_only(tmp_path: Path, caplog) -> None:
    client = _secret()
    code, exports = _start(tmp_path, client, caplog)
    assert code == 0 and client.calls == [KV_ARN]
    parsed = urlparse(exports["LMCACHE_REMOTE_URL"])
    assert (parsed.scheme, parsed.hostname, parsed.port, parsed.path) == (
        "rediss", "cache.internal", 6380, "/0")
    assert [k for k, v in exports.items() if "S3ntinel" in v] == ["LMCACHE_REMOTE_URL"]
    assert exports["LMCACHE_TRACK_USAGE"] == "false"  # telemetry would send the URL
    assert exports["LMIKIT_REDACT_ENV"] == "LMCACHE_REMOTE_URL"
    assert "S3ntinel" not in caplog.text and KV_ARN in caplog.text
    assert "S3ntinel" not in _files_text(tmp_path / "rt")


def test_lmcache_loader_takes_the_exported_url_over_the_file(tmp_path: Path, caplog,
                                                             monkeypatch) -> None:
    """LMCache reads the start step's file, then its LMCACHE_* environment on top."""
    config_module = pytest.importorskip("lmcache.v1.config")
    redis_connection = pytest.importorskip("redis.connection")
    code, exports = _start(tmp_path, _secret(), caplog)
    assert code == 0
    path = exports["LMCACHE_CONFIG_FILE"]
    assert yaml.safe_load(Path(path).read_text())["remote_url"] == REMOTE  # no credentials
    monkeypatch.setenv("LMCACHE_REMOTE_URL", exports["LMCACHE_REMOTE_URL"])
    config = config_module.LMCacheEngineConfig.from_file(path)
    config.update_config_from_env()
    assert config.remote_url == exports["LMCACHE_REMOTE_URL"]
    assert config.remote_serde == "naive" and config.local_cpu is True
    # LMCache's parse_remote_url is urllib.parse.urlparse: host and port as LMCache sees them.
    assert (urlparse(config.remote_url).hostname, urlparse(config.remote_url).port) == (
        "cache.internal", 6380)
    # What redis.ConnectionPool.from_url (LMCache's RedisConnector) connects with.
    options = redis_connection.parse_url(config.remote_url)
    assert (options["username"], options["password"]) == (USER, PASSWORD)
    assert (options["host"], options["port"], options["db"]) == ("cache.internal", 6380, 0)
    assert options["connection_class"].__name__ == "SSLConnection"  # rediss:// kept


def test_plain_text_secret_is_the_default_users_password(tmp_path: Path, caplog) -> None:
    redis_connection = pytest.importorskip("redis.connection")
    code, exports = _start(tmp_path, FakeSecrets({"SecretString": PASSWORD}), caplog)
    assert code == 0
    options = redis_connection.parse_url(exports["LMCACHE_REMOTE_URL"])
    assert options.get("username") is None and options["password"] == PASSWORD
    assert "default user" in caplog.text and "S3ntinel" not in caplog.text


@pytest.mark.parametrize("body", [{"user": "x"}, {"username": "u", "password": ""},
                                  {"password": 7}])
def test_unusable_secret_stops_the_start_naming_keys_not_values(tmp_path: Path, caplog,
                                                                body) -> None:
    body = {**body, "note": "S3ntinel"}
    code, exports = _start(tmp_path, FakeSecrets({"SecretString": json.dumps(body)}), caplog)
    assert code == 2 and exports == {}
    assert "'password'" in caplog.text and "keys present" in caplog.text
    assert "S3ntinel" not in caplog.text


def test_unreadable_secret_names_the_permission(tmp_path: Path, caplog) -> None:
    code, _ = _start(tmp_path, FakeSecrets(error="AccessDeniedException"), caplog)
    assert code == 2
    assert "AccessDeniedException" in caplog.text
    assert "secretsmanager:GetSecretValue" in caplog.text and KV_ARN in caplog.text


def test_no_remote_tier_reads_no_secret(tmp_path: Path, caplog) -> None:
    client = _secret()
    env = _remote_env(tmp_path, LMIKIT_PLAN=json.dumps({"tier": "cpu", "tp": 1}))
    out = io.StringIO()
    with caplog.at_level(logging.INFO):
        assert main(env, stdout=out, host=_host(tmp_path), secrets_client=client) == 0
    assert client.calls == [] and "LMCACHE_REMOTE_URL" not in _parse(out.getvalue())
    assert "not used" in caplog.text


def test_user_telemetry_opt_in_is_overridden(tmp_path: Path, caplog) -> None:
    code, exports = _start(tmp_path, _secret(), caplog, LMCACHE_TRACK_USAGE="true")
    assert code == 0 and exports["LMCACHE_TRACK_USAGE"] == "false"
    assert "LMCACHE_TRACK_USAGE=true replaced by false" in caplog.text


def test_credentials_never_reach_the_metrics_processes(tmp_path: Path, caplog) -> None:
    spawn = FakeSpawn()
    env = _remote_env(tmp_path, LMIKIT_METRICS_PATH="/metrics", LMIKIT_METRICS_FRONT="false",
                      LMIKIT_EMF=json.dumps({"namespace": "LMIKit/Container", "interval_s": 60,
                                             "dimensions": {"EndpointName": "e",
                                                            "InferenceComponentName": "c"}}))
    out = io.StringIO()
    assert main(env, stdout=out, host=_host(tmp_path), secrets_client=_secret(),
                spawn=spawn) == 0
    assert len(spawn.children) == 2
    for child in spawn.children:
        assert not any("S3ntinel" in v for v in child["env"].values())


def test_url_with_credentials_refuses_other_schemes_and_existing_users() -> None:
    creds = RemoteCredentials("u", "S3ntinel")
    with pytest.raises(SecretError, match="redis and rediss URLs only; the remote tier is s3"):
        url_with_credentials("s3://bucket/prefix", creds)
    with pytest.raises(SecretError, match="already names a user") as info:
        url_with_credentials("redis://other:S3ntinel2@h:6379", creds)
    assert "S3ntinel" not in str(info.value)


def test_remote_credentials_repr_shows_no_value() -> None:
    text = repr(fetch_remote_credentials(KV_ARN, client=_secret()))
    assert "S3ntinel" not in text and USER not in text


# --- log redaction in the LMI server's processes -------------------------------------------

LMCACHE_LOG_SITES = [  # (file under lmcache/, the logging call that prints the remote URL)
    ("v1/storage_backend/connector/redis_adapter.py", "Creating Redis connector for URL"),
    ("v1/storage_backend/remote_backend.py", "Connection initialized/re-established at"),
    ("v1/storage_backend/remote_backend.py", "Connected to remote storage at"),
    ("v1/health_monitor/base.py", "Health check failed"),
]


def _lmcache_messages() -> list[str]:
    """The format strings LMCache 0.5.6 logs its remote URL with, read from its source."""
    lmcache = pytest.importorskip("lmcache")
    root = Path(lmcache.__file__).parent
    out = []
    for rel, words in LMCACHE_LOG_SITES:
        text = (root / rel).read_text()
        match = re.search(r'"(' + re.escape(words) + r'[^"]*)"', text)
        assert match, f"{rel} no longer logs {words!r}"
        out.append(match.group(1).split("%s")[0] + "%s")
    return out


def _site_dir(tmp_path: Path) -> Path:
    """What the Dockerfile installs into site-packages: the module and its .pth line."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    shutil.copy(CONTAINER / "lmikit_runtime" / "logredact.py", site_dir / "lmikit_log_redact.py")
    (site_dir / "lmikit-log-redact.pth").write_text("import lmikit_log_redact\n")
    return site_dir


SCRIPT = """
import logging, site, sys
site.addsitedir(sys.argv[1])  # processes the .pth file as at interpreter start
from lmcache.logging import init_logger
log = init_logger("lmcache.v1.storage_backend.remote_backend")
url = __import__("os").environ["LMCACHE_REMOTE_URL"]
for fmt in sys.argv[2:]:
    log.warning(fmt, url)
log.debug(f"Parsing remote URL: {url}")
try:
    raise ValueError(f"cannot connect to {url}")
except ValueError:
    log.exception("remote backend failed")
raise RuntimeError(f"uncaught: {url}")
"""


def _run_lmi_process(tmp_path: Path, redact: bool) -> str:
    creds = RemoteCredentials(USER, PASSWORD)
    url = url_with_credentials(REMOTE, creds)
    env = {"PATH": "/usr/bin:/bin", "LMCACHE_REMOTE_URL": url, "LMCACHE_LOG_LEVEL": "DEBUG",
           "LMCACHE_TRACK_USAGE": "false"}
    if redact:
        env["LMIKIT_REDACT_ENV"] = "LMCACHE_REMOTE_URL"
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(_site_dir(tmp_path)),
                             *_lmcache_messages()], env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 1  # the uncaught RuntimeError
    return result.stdout + result.stderr


def test_lmi_process_logs_lmcache_messages_with_credentials_masked(tmp_path: Path) -> None:
    text = _run_lmi_process(tmp_path, redact=True)
    assert "Creating Redis connector for URL: rediss://****@cache.internal:6380/0" in text
    assert "Health check failed: rediss://****@cache.internal:6380/0" in text
    assert "uncaught: rediss://****@cache.internal:6380/0" in text
    assert "cannot connect to rediss://****@" in text  # the logged traceback
    encoded = urlparse(url_with_credentials(REMOTE, RemoteCredentials(USER, PASSWORD))).password
    assert "S3ntinel" not in text and encoded not in text


def test_without_redaction_the_same_process_leaks(tmp_path: Path) -> None:
    """The control: LMCache itself prints the password when nothing masks it."""
    assert "S3ntinel" in _run_lmi_process(tmp_path, redact=False)


def test_redaction_is_inert_without_its_variable() -> None:
    before = logging.getLogRecordFactory()
    assert logredact.install({"LMCACHE_REMOTE_URL": "redis://u:S3ntinel@h:1"}) is False
    assert logging.getLogRecordFactory() is before


def test_redaction_masks_url_user_info_and_password_forms() -> None:
    url = url_with_credentials(REMOTE, RemoteCredentials(USER, PASSWORD))
    secrets = logredact.secrets_in({"LMIKIT_REDACT_ENV": "A,B", "A": url, "B": "hf_tok3n"})
    line = f"{url} | {PASSWORD} | {urlparse(url).password} | hf_tok3n | {USER}"
    clean = logredact.redact(line, secrets)
    assert "S3ntinel" not in clean and "hf_tok3n" not in clean
    assert clean.startswith("rediss://****@cache.internal:6380/0 | **** | **** | **** | ")
    assert clean.endswith(USER)  # a user name alone is no secret


@pytest.mark.parametrize("module", [secrets, logredact], ids=lambda m: m.__name__)
def test_docstring_examples_run(module) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
