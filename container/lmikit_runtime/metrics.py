"""vLLM's and LMCache's Prometheus metrics, collected across processes; the port-9400 sidecar.

The start-up step sets ``PROMETHEUS_MULTIPROC_DIR`` for the LMI server, so every Python
process it starts (vLLM engine, LMCache workers) writes its prometheus_client metrics
there; ``exposition`` merges them (``MultiProcessCollector``). The metrics front
(``lmikit_runtime.front``, port 8080, the default) serves it at ``LMIKIT_METRICS_PATH``; this
small stdlib HTTP server serves the same text on ``LMIKIT_METRICS_PORT`` when the front is off
(``LMIKIT_METRICS_FRONT=false``) or that port is set explicitly. See docs/container.md.

Run: ``python3 -m lmikit_runtime.metrics``.
"""

from __future__ import annotations

import logging
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PORT = 9400
log = logging.getLogger("lmikit.metrics")


def multiprocess_registry(multiproc_dir: str) -> Any:
    """A registry merging every process's metrics in ``multiproc_dir`` (read on collect).

    The one collection path: the exposition below (front, sidecar) and the EMF emitter
    (``lmikit_runtime.emf``, which walks ``registry.collect()``) both use it.
    """
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=multiproc_dir)
    return registry


def exposition(multiproc_dir: str) -> tuple[bytes, str]:
    """(text, content type) of every process's metrics in ``multiproc_dir``."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(multiprocess_registry(multiproc_dir)), CONTENT_TYPE_LATEST


def make_server(path: str, port: int, multiproc_dir: str,
                host: str = "0.0.0.0") -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?", 1)[0] != path:
                self.send_error(404, f"metrics are at {path}")
                return
            try:
                body, content_type = exposition(multiproc_dir)
            except Exception as exc:  # a bad mmap file must not kill the sidecar
                log.warning("metrics collection failed: %s", exc)
                self.send_error(500, "metrics collection failed")
                return
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet: scraped often
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="lmikit-metrics: %(message)s",
                        stream=sys.stderr)
    path = os.environ.get("LMIKIT_METRICS_PATH", "/metrics")
    port = int(os.environ.get("LMIKIT_METRICS_PORT", DEFAULT_PORT))
    multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not multiproc_dir:
        log.error("PROMETHEUS_MULTIPROC_DIR is not set; nothing to serve")
        return 1
    server = make_server(path, port, multiproc_dir)
    log.info("serving %s on port %d from %s", path, port, multiproc_dir)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
