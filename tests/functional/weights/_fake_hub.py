"""A Hugging Face Hub on localhost that answers what huggingface_hub asks, the way the Hub
does, with faults to inject.

What it serves, and the source each answer copies:
- ``GET /api/models/{id}[/revision/{rev}]?blobs=true``: the model info huggingface_hub's
  ``HfApi.model_info(files_metadata=True)`` reads (``hf_api.py``, ``ModelInfo.__init__``:
  ``sha``, ``gated``, ``siblings[]{rfilename, size, blobId, lfs{size, sha256,
  pointerSize}}``; size, blobId and lfs only with ``blobs=true``).
- ``GET|HEAD /{id}/resolve/{rev}/{path}``: a file in git answers 200 with its bytes and
  ``ETag`` = its git blob id; an LFS file answers 302 to the CDN (another origin) with
  ``X-Linked-Etag`` = its sha256 and ``X-Linked-Size`` (``file_download.py``: "An object's
  ETag is: its git-sha1 if stored in git, or its sha256 if stored in git-lfs"). Both carry
  ``X-Repo-Commit``.
- Errors with the ``X-Error-Code`` / ``X-Error-Message`` headers ``hf_raise_for_status``
  reads (``utils/_http.py``): RepoNotFound (401 without a token, 404 with one: the comment
  there), RevisionNotFound (404), EntryNotFound (404), GatedRepo (401 without a token, "You
  must have access to it and be authenticated to access it. Please log in.", as quoted in
  users' reports such as ToTheBeginning/PuLID#97; 403 with a token whose account is not in
  the authorized list, huggingface/huggingface_hub#1225), and 401 "Invalid credentials in
  Authorization header" (``hf_raise_for_status`` tests for that message).
- The CDN serves an LFS file by its sha256, with HTTP Range (206), as S3/CloudFront do.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

MIB = 1024 * 1024
_ZEROS = bytes(MIB)


class Content:
    """A file's bytes: given, or ``size`` zeros made as they are sent."""

    def __init__(self, data: bytes | None = None, zeros: int = 0) -> None:
        self.data = data
        self.size = len(data) if data is not None else zeros
        self._sha256: str | None = None
        self._blob_id: str | None = None

    def chunks(self, start: int = 0) -> Iterator[bytes]:
        if self.data is not None:
            for at in range(start, self.size, MIB):
                yield self.data[at:at + MIB]
            return
        left = self.size - start
        while left > 0:
            yield _ZEROS[:min(left, MIB)]
            left -= MIB

    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            digest = hashlib.sha256()
            for chunk in self.chunks():
                digest.update(chunk)
            self._sha256 = digest.hexdigest()
        return self._sha256

    @property
    def blob_id(self) -> str:
        if self._blob_id is None:
            digest = hashlib.sha1(f"blob {self.size}\0".encode())
            for chunk in self.chunks():
                digest.update(chunk)
            self._blob_id = digest.hexdigest()
        return self._blob_id


@dataclass
class FakeRepo:
    model_id: str
    commits: dict[str, dict[str, tuple[Content, bool]]]  # sha -> path -> (content, lfs)
    refs: dict[str, str]  # branch or tag -> sha
    gated: str | bool = False
    granted: set[str] = field(default_factory=set)  # tokens let through the gate

    def commit(self, files: dict[str, bytes | Content], lfs_from: int = 1024,
               ref: str = "main") -> str:
        """A new commit of ``files`` (a file of ``lfs_from`` bytes or more is in LFS) that
        ``ref`` points to; returns its sha."""
        contents = {path: value if isinstance(value, Content) else Content(value)
                    for path, value in files.items()}
        sha = hashlib.sha1(json.dumps(sorted((p, c.size, c.sha256) for p, c in
                                             contents.items())).encode()).hexdigest()
        self.commits[sha] = {p: (c, c.size >= lfs_from) for p, c in contents.items()}
        self.refs[ref] = sha
        return sha


@dataclass
class Fault:
    cut_after: int | None = None  # close the connection when the file's byte N is next
    times: int | None = None  # how many answers it spoils (None: every one)
    corrupt: bool = False  # send other bytes of the same length


class FakeHub:
    """The Hub at ``url`` and its CDN at ``cdn_url``. ``tokens``: those the Hub accepts;
    ``requests``: ``(server, method, path, authorized, range)`` of every request."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.tokens: set[str] = set()
        self.faults: dict[str, Fault] = {}
        self.requests: list[tuple[str, str, str, bool, str | None]] = []
        self.lock = threading.Lock()
        self._by_sha256: dict[str, Content] = {}
        self.hub = self._serve("hub")
        self.cdn = self._serve("cdn")
        self.url = f"http://127.0.0.1:{self.hub.server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def add_repo(self, model_id: str, files: dict[str, bytes | Content], *,
                 gated: str | bool = False, lfs_from: int = 1024) -> FakeRepo:
        repo = FakeRepo(model_id, {}, {}, gated)
        repo.commit(files, lfs_from)
        self.repos[model_id] = repo
        return repo

    def fault(self, path: str, **kwargs: Any) -> None:
        self.faults[path] = Fault(**kwargs)

    def served(self, server: str = "cdn") -> list[str]:
        """The paths of the GETs ``server`` answered (CDN paths are sha256s)."""
        return [path for s, method, path, _, _ in self.requests
                if s == server and method == "GET"]

    def close(self) -> None:
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    # --- serving ---------------------------------------------------------------------

    def _serve(self, name: str) -> ThreadingHTTPServer:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                hub._answer(name, self, "GET")

            def do_HEAD(self) -> None:  # noqa: N802
                hub._answer(name, self, "HEAD")

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return server

    def _answer(self, server: str, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        auth = handler.headers.get("Authorization", "")
        with self.lock:
            self.requests.append((server, method, unquote(parts.path), bool(auth),
                                  handler.headers.get("Range")))
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        if server == "cdn":
            self._cdn(handler, method, unquote(parts.path))
            return
        if token is not None and token not in self.tokens:
            self._error(handler, 401, None, "Invalid credentials in Authorization header")
            return
        path = unquote(parts.path)
        if path.startswith("/api/models/"):
            self._model_info(handler, path[len("/api/models/"):],
                             parse_qs(parts.query).get("blobs", [""])[0].lower() == "true",
                             token)
        elif "/resolve/" in path:
            self._resolve(handler, method, path[1:], token)
        else:
            self._error(handler, 404, None, "Not found")

    def _repo_at(self, handler: BaseHTTPRequestHandler, model_id: str, revision: str,
                 token: str | None) -> tuple[FakeRepo, str] | None:
        repo = self.repos.get(model_id)
        if repo is None:
            self._error(handler, 404 if token else 401, "RepoNotFound", "Repository not found")
            return None
        sha = repo.refs.get(revision, revision if revision in repo.commits else None)
        if sha is None:
            self._error(handler, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo, sha

    def _model_info(self, handler: BaseHTTPRequestHandler, rest: str, blobs: bool,
                    token: str | None) -> None:
        model_id, _, revision = rest.partition("/revision/")
        found = self._repo_at(handler, model_id, revision or "main", token)
        if found is None:
            return
        repo, sha = found
        siblings = []
        for path, (content, lfs) in sorted(repo.commits[sha].items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:" \
                          f"{content.sha256}\nsize {content.size}\n".encode()
                sibling.update(size=content.size, blobId=(Content(pointer).blob_id if lfs
                                                          else content.blob_id))
                if lfs:
                    sibling["lfs"] = {"size": content.size, "sha256": content.sha256,
                                      "pointerSize": len(pointer)}
            siblings.append(sibling)
        body = {"_id": sha[:24], "id": model_id, "modelId": model_id, "sha": sha,
                "private": False, "disabled": False, "gated": repo.gated,
                "tags": [], "siblings": siblings}
        self._send(handler, 200, {"Content-Type": "application/json"},
                   json.dumps(body).encode())

    def _resolve(self, handler: BaseHTTPRequestHandler, method: str, path: str,
                 token: str | None) -> None:
        model_id, _, rest = path.partition("/resolve/")
        revision, _, filename = rest.partition("/")
        found = self._repo_at(handler, model_id, revision, token)
        if found is None:
            return
        repo, sha = found
        if repo.gated and token is None:
            self._error(handler, 401, "GatedRepo", f"Access to model {model_id} is restricted. "
                        "You must have access to it and be authenticated to access it. "
                        "Please log in.")
            return
        if repo.gated and token not in repo.granted:
            self._error(handler, 403, "GatedRepo", f"Access to model {model_id} is restricted "
                        f"and you are not in the authorized list. Visit {self.url}/{model_id} "
                        "to ask for access.")
            return
        entry = repo.commits[sha].get(filename)
        if entry is None:
            self._error(handler, 404, "EntryNotFound", "Entry not found")
            return
        content, lfs = entry
        if lfs:
            self._by_sha256[content.sha256] = content
            headers = {"Location": f"{self.cdn_url}/repos/{content.sha256}?"
                                   f"response-content-disposition={quote(filename)}",
                       "X-Repo-Commit": sha, "X-Linked-Etag": f'"{content.sha256}"',
                       "X-Linked-Size": str(content.size), "ETag": f'"{content.blob_id}"'}
            self._send(handler, 302, headers, b"Found. Redirecting")
            return
        self._content(handler, method, filename, content,
                      {"X-Repo-Commit": sha, "ETag": f'"{content.blob_id}"'})

    def _cdn(self, handler: BaseHTTPRequestHandler, method: str, path: str) -> None:
        content = self._by_sha256.get(path.rsplit("/", 1)[-1])
        if content is None:
            self._send(handler, 404, {}, b"NoSuchKey")
            return
        name = next((p for repo in self.repos.values() for files in repo.commits.values()
                     for p, (c, _) in files.items() if c is content), "")
        self._content(handler, method, name, content, {"ETag": f'"{content.sha256}"'})

    def _content(self, handler: BaseHTTPRequestHandler, method: str, name: str,
                 content: Content, headers: dict[str, str]) -> None:
        start, status = 0, 200
        asked = handler.headers.get("Range", "")
        if asked.startswith("bytes=") and asked.endswith("-"):
            start, status = int(asked[len("bytes="):-1]), 206
            headers["Content-Range"] = f"bytes {start}-{content.size - 1}/{content.size}"
        headers.update({"Content-Length": str(content.size - start), "Accept-Ranges": "bytes",
                        "Content-Type": "application/octet-stream"})
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        if method == "HEAD":
            return
        fault = self._take_fault(name)
        sent = 0
        for chunk in content.chunks(start):
            if fault is not None and fault.corrupt and sent == 0:
                chunk = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
            if fault is not None and fault.cut_after is not None \
                    and start + sent + len(chunk) > fault.cut_after:
                handler.wfile.write(chunk[:max(0, fault.cut_after - start - sent)])
                handler.wfile.flush()
                handler.close_connection = True
                return
            try:
                handler.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                handler.close_connection = True
                return
            sent += len(chunk)

    def _take_fault(self, name: str) -> Fault | None:
        with self.lock:
            fault = self.faults.get(name)
            if fault is None:
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self.faults[name]
            return fault

    def _error(self, handler: BaseHTTPRequestHandler, status: int, code: str | None,
               message: str) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(handler, status, headers, json.dumps({"error": message}).encode())

    def _send(self, handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str],
              body: bytes) -> None:
        handler.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            handler.send_header(key, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)
