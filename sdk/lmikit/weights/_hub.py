"""The Hugging Face Hub side of staging, through ``huggingface_hub`` only: a snapshot's files
with the checksums the Hub publishes for them, and each file as a stream of bytes.

``huggingface_hub`` comes with ``pip install 'lmikit[weights]'``; it is imported only when
the Hub is reached, and its absence is one line naming that command. ``HF_ENDPOINT`` is
honoured (a mirror). A download that breaks off, or gets a 429 or 5xx answer, resumes where
it broke (an HTTP Range request), :data:`RESUMES` times per file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from lmikit._extras import require
from lmikit.weights._destination import WeightsError

NEEDED_BY = "lmikit weights stage"
RESUMES = 3
RETRY_STATUSES = (429, 500, 502, 503, 504)  # answers worth asking again, after 1, 2, 4 s


@dataclass(frozen=True)
class HubFile:
    """One file of a snapshot. ``sha256``: the Hub's LFS sha256 of the content (files stored
    with LFS or Xet); ``blob_id``: the git blob id (the checksum of files stored in git)."""

    path: str
    size: int
    sha256: str | None
    blob_id: str | None


@dataclass(frozen=True)
class Snapshot:
    """A model repo at one commit: what ``revision`` (a branch, tag or sha) pointed to."""

    model_id: str
    revision: str
    commit: str
    gated: str | None  # "auto" or "manual" when the repo is gated
    files: tuple[HubFile, ...]


def require_hub() -> ModuleType:
    """huggingface_hub, or MissingPackage naming `pip install 'lmikit[weights]'`."""
    return require("huggingface_hub", NEEDED_BY)


class Hub:
    """The Hub at ``endpoint`` (else ``HF_ENDPOINT``, else huggingface.co), asked with
    ``token`` (else huggingface_hub's own: ``HF_TOKEN``, then ``hf auth login``'s file)."""

    def __init__(self, token: str | None = None, endpoint: str | None = None) -> None:
        self.token = token
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None

    @property
    def url(self) -> str:
        if self.endpoint:
            return self.endpoint
        from huggingface_hub import constants

        return str(constants.ENDPOINT)

    def page(self, model_id: str) -> str:
        return f"{self.url}/{model_id}"

    def has_token(self) -> bool:
        require_hub()
        from huggingface_hub import get_token

        return self.token is not None or get_token() is not None

    def snapshot(self, model_id: str, revision: str) -> Snapshot:
        """Every file of ``model_id`` at ``revision``, with sizes and checksums."""
        require_hub()
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HFValidationError

        try:
            info = HfApi(endpoint=self.endpoint, token=self.token).model_info(
                model_id, revision=revision, files_metadata=True)
        except HFValidationError as exc:
            raise WeightsError(f"model id {model_id!r} is not a Hub repo id ({exc}): give "
                               "ORG/NAME, e.g. meta-llama/Llama-3.1-8B-Instruct") from None
        except _broken_connection() as exc:
            raise self.error(exc, model_id, revision) from None
        if not info.sha:
            raise WeightsError(f"the Hub gave no commit for {model_id}@{revision}")
        files = []
        for sibling in info.siblings or ():
            if sibling.size is None:
                raise WeightsError(f"the Hub gave no size for {sibling.rfilename} of "
                                   f"{model_id}@{info.sha}")
            files.append(HubFile(sibling.rfilename, int(sibling.size),
                                 sibling.lfs.sha256 if sibling.lfs else None, sibling.blob_id))
        return Snapshot(model_id, revision, info.sha, info.gated or None, tuple(files))

    def chunks(self, snapshot: Snapshot, file: HubFile) -> Generator[bytes, None, None]:
        """The bytes of ``file`` at the snapshot's commit, as they arrive."""
        require_hub()
        from huggingface_hub import constants, get_session, hf_hub_url
        from huggingface_hub.errors import HfHubHTTPError
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

        url = hf_hub_url(snapshot.model_id, file.path, revision=snapshot.commit,
                         endpoint=self.endpoint)
        offset, breaks = 0, 0
        while offset < file.size or not breaks:
            headers = build_hf_headers(token=self.token)
            if offset:
                headers["Range"] = f"bytes={offset}-"
            pause = 0.0
            try:
                with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                                          timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT) as response:
                    hf_raise_for_status(response)
                    skip = _resumed_at(response, offset, file.path)
                    for chunk in response.iter_bytes():  # no re-chunking: no copy
                        if skip:
                            cut, skip = min(skip, len(chunk)), skip - min(skip, len(chunk))
                            chunk = chunk[cut:]
                        if chunk:
                            offset += len(chunk)
                            yield chunk
                return
            except HfHubHTTPError as exc:
                status = getattr(exc.response, "status_code", 0)
                if status not in RETRY_STATUSES:
                    raise self.error(exc, snapshot.model_id, snapshot.revision,
                                     file.path) from None
                reason, pause = f"HTTP {status}", float(2 ** breaks)
            except _broken_connection() as exc:  # the connection broke: go on at once
                reason = f"{type(exc).__name__}: {exc}"
            breaks += 1
            if breaks > RESUMES:
                raise WeightsError(f"the download of {file.path} broke off {breaks} times, the "
                                   f"last at byte {offset:,} of {file.size:,} ({reason})")
            time.sleep(pause)

    def error(self, exc: BaseException, model_id: str, revision: str,
              path: str | None = None) -> WeightsError:
        """``exc`` from huggingface_hub, in words that name the fix."""
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            RemoteEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        status = getattr(getattr(exc, "response", None), "status_code", 0)
        page = self.page(model_id)
        if isinstance(exc, GatedRepoError):
            if status == 403:
                return WeightsError(
                    f"{model_id} is a gated repo and the token's Hub account has not been "
                    f"granted access: ask for it at {page} (the account that owns the token "
                    "must be approved), then run the command again")
            return WeightsError(gated_without_token(model_id, page))
        if isinstance(exc, RevisionNotFoundError):
            return WeightsError(f"{model_id} has no revision {revision!r} on the Hub: give a "
                                "branch, a tag or a full commit sha (--revision)")
        if isinstance(exc, RepositoryNotFoundError):
            return WeightsError(
                f"no model {model_id!r} on the Hub at {self.url}, or it is private and the "
                "request's token cannot see it: check the id (ORG/NAME, as in the model's "
                "page address); for a private repo set HF_TOKEN or pass --token-secret ARN")
        if isinstance(exc, RemoteEntryNotFoundError):
            return WeightsError(f"{path} is listed in {model_id}@{revision} but the Hub "
                                "has no such file")
        if isinstance(exc, HfHubHTTPError):
            said = getattr(exc, "server_message", "") or ""
            if status == 401:
                return WeightsError(f"the Hub refused the token (401 {said}): check HF_TOKEN "
                                    "or the secret given with --token-secret")
            what = f"{path} of {model_id}" if path else model_id
            return WeightsError(f"the Hub answered {status} for {what}"
                                + (f": {said}" if said else ""))
        return WeightsError(f"could not reach the Hub at {self.url} ({type(exc).__name__}: "
                            f"{exc}); check the network, or HF_ENDPOINT for a mirror")


def gated_without_token(model_id: str, page: str) -> str:
    return (f"{model_id} is a gated repo and no Hub token was given: accept its terms at "
            f"{page} with your Hub account, then set HF_TOKEN to a token of that account or "
            "pass --token-secret ARN (a Secrets Manager secret holding the token)")


def _broken_connection() -> tuple[type[BaseException], ...]:
    """What a broken connection raises under huggingface_hub: OSError, its HTTP client's error base
    (httpx's under huggingface_hub 1.x, httpx2's under 2.x, as ``huggingface_hub.errors``
    imports it) and the errors of the transport below it (httpcore or httpcore2), which a
    body cut short can raise unmapped while the stream is read."""
    import importlib

    from huggingface_hub import errors

    client = errors.HTTPError
    transport_name = client.__module__.split(".")[0].replace("httpx", "httpcore", 1)
    below: tuple[type[BaseException], ...]
    try:
        transport = importlib.import_module(transport_name)
        below = (transport.ProtocolError, transport.NetworkError, transport.TimeoutException)
    except (ImportError, AttributeError):
        below = ()
    return (OSError, client, *below)


def _resumed_at(response: Any, offset: int, path: str) -> int:
    """How many bytes of ``response`` to drop to go on at ``offset``: 0 for a 206 that starts
    there, ``offset`` for a 200 (the server sent the whole file again)."""
    if not offset or response.status_code == 200:
        return offset
    start = response.headers.get("Content-Range", "").removeprefix("bytes ").split("-")[0]
    if response.status_code != 206 or start != str(offset):
        raise WeightsError(f"resuming {path} at byte {offset:,}: the Hub answered "
                           f"{response.status_code} {response.headers.get('Content-Range')}")
    return 0
