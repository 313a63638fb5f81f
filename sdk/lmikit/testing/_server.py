"""The fake SageMaker as a local HTTP server, next to moto's server for S3, IAM, STS,
CloudWatch and Application Auto Scaling: a sandbox anyone can point boto3 (and the lmikit
CLI) at without an AWS account.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lmikit.testing._cache import cloudwatch_sink
from lmikit.testing._clock import SystemClock
from lmikit.testing._control import Timings
from lmikit.testing._fake import FakeSageMaker, s3_artifact_exists
from lmikit.testing._metrics import s3_artifact_reader
from lmikit.testing._role_access import iam_role_reads
from lmikit.testing._wire import WireRequest

SANDBOX_TIMINGS = Timings(endpoint_create=4.0, endpoint_update=3.0, component_create=3.0,
                          component_update=3.0, adapter_create=1.0, delete=1.0)


def _handler(fake: FakeSageMaker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            req = WireRequest(self.command, self.path,
                              {k.lower(): v for k, v in self.headers.items()}, body)
            resp = fake.handle(req)
            if resp.lost:  # applied; the client sees the connection close unanswered
                self.close_connection = True
                return
            self.send_response(resp.status)
            for k, v in resp.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding"):
                    self.send_header(k, v)
            if resp.streaming:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in resp.chunks():
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            else:
                data = b"".join(resp.chunks())
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        do_POST = _serve
        do_GET = _serve
        do_PUT = _serve
        do_DELETE = _serve

    return Handler


ENV_KEYS = ("AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
            "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_IAM", "AWS_ENDPOINT_URL_STS",
            "AWS_ENDPOINT_URL_CLOUDWATCH", "AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING",
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
            "LMIKIT_POLL_SECONDS", "LMIKIT_IAM_PROPAGATION_SECONDS")
# Sandbox resources change state in seconds, and its IAM (moto's) is consistent at once: the
# CLI polls every half second and does not wait for a new role to propagate.
POLL_SECONDS = "0.5"
"""The variables :meth:`Sandbox.env` sets."""


@dataclass
class Sandbox:
    """Both servers. ``env()`` gives the variables that point boto3 at them."""

    fake: FakeSageMaker
    host: str
    port: int
    moto_port: int
    _server: ThreadingHTTPServer
    _moto: Any

    def env(self) -> dict[str, str]:
        sm = f"http://{self.host}:{self.port}"
        aws = f"http://{self.host}:{self.moto_port}"
        return {
            "AWS_ENDPOINT_URL_SAGEMAKER": sm,
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": sm,
            "AWS_ENDPOINT_URL_S3": aws,
            "AWS_ENDPOINT_URL_IAM": aws,
            "AWS_ENDPOINT_URL_STS": aws,
            "AWS_ENDPOINT_URL_CLOUDWATCH": aws,
            "AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING": aws,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": self.fake.region,
            "LMIKIT_POLL_SECONDS": POLL_SECONDS,
            "LMIKIT_IAM_PROPAGATION_SECONDS": "0",
        }

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._moto is not None:
            self._moto.stop()


class SandboxError(Exception):
    """The sandbox cannot start; the message says why and what to do."""


MOTO_MISSING = ("the sandbox runs moto for S3, IAM, STS and CloudWatch, and moto is not "
                "installed: pip install 'lmikit[sandbox]'")


def port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, or None when it can (checked by binding it)."""
    try:
        with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def free_port_pair(host: str = "127.0.0.1", tries: int = 50) -> int | None:
    """A port P with P and P + 1 both free on ``host`` (what ``--port`` needs), or None."""
    for _ in range(tries):
        with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if port < 65534 and port_problem(host, port + 1) is None:
            return port
    return None


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def start_sandbox(host: str = "127.0.0.1", port: int = 4566, *, region: str = "us-east-1",
                  timings: Timings | None = None, with_moto: bool = True,
                  token_seconds: float = 0.03, ttft_seconds: float = 0.2) -> Sandbox:
    """Start the fake SageMaker on ``port`` and moto on ``port + 1`` (threads; returns).

    Raises :class:`SandboxError` (never waits) when a port is taken or moto is missing.
    """
    moto = None
    moto_port = port + 1
    artifact_exists = None
    artifact_reader = None
    role_reads = None
    sink = None
    for which, number in (("the fake SageMaker", port),
                          *((("moto", moto_port),) if with_moto else ())):
        problem = port_problem(host, number)
        if problem:
            free = free_port_pair(host)
            hint = f", e.g. --port {free}" if free else ""
            raise SandboxError(f"port {number} on {host} (for {which}) cannot be used: "
                               f"{problem}. The sandbox listens on PORT and PORT+1; choose "
                               f"another PORT with --port{hint}")
    if with_moto:
        import boto3

        try:
            from moto.server import ThreadedMotoServer
        except ModuleNotFoundError as exc:
            raise SandboxError(MOTO_MISSING) from exc

        from lmikit.testing._moto import teach_moto_inference_components

        teach_moto_inference_components()  # the server runs in this process
        # moto's server is werkzeug's, which logs a line per request to stderr once its
        # logger has no level (werkzeug/_internal.py _log); the fake SageMaker logs none.
        # A caller that set the level keeps it.
        werkzeug_log = logging.getLogger("werkzeug")
        if werkzeug_log.level == logging.NOTSET:
            werkzeug_log.setLevel(logging.WARNING)
        moto = ThreadedMotoServer(ip_address=host, port=moto_port, verbose=False)
        moto.start()
        s3 = boto3.client("s3", region_name=region, endpoint_url=f"http://{host}:{moto_port}",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        artifact_exists = s3_artifact_exists(s3)
        artifact_reader = s3_artifact_reader(s3)
        role_reads = iam_role_reads(boto3.client(
            "iam", region_name=region, endpoint_url=f"http://{host}:{moto_port}",
            aws_access_key_id="testing", aws_secret_access_key="testing"))
        sink = cloudwatch_sink(boto3.client(
            "cloudwatch", region_name=region, endpoint_url=f"http://{host}:{moto_port}",
            aws_access_key_id="testing", aws_secret_access_key="testing"))

    fake = FakeSageMaker(region, clock=SystemClock(), timings=timings or SANDBOX_TIMINGS,
                         artifact_exists=artifact_exists, stream_part_bytes=48,
                         token_seconds=token_seconds, ttft_seconds=ttft_seconds,
                         artifact_reader=artifact_reader, metrics_sink=sink,
                         role_reads=role_reads)
    try:
        server = ThreadingHTTPServer((host, port), _handler(fake))
    except OSError as exc:  # taken between the check and now
        if moto is not None:
            moto.stop()
        raise SandboxError(f"port {port} on {host} cannot be used: {exc.strerror or exc}; "
                           "choose another PORT with --port") from exc
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="lmikit-sandbox", daemon=True).start()
    return Sandbox(fake, host, server.server_address[1], moto_port, server, moto)
