"""``lmikit.weights.stage`` against a local fake Hub (``_fake_hub.py``) and
moto's S3: streamed, verified, resumable, the manifest last, gated repos and bad input."""

from __future__ import annotations

import json
import threading
from typing import Any

import boto3
import pytest

from lmikit.errors import Interrupted
from lmikit.weights import MANIFEST_NAME, StageEvent, WeightsError, check_staged, stage

from ._fake_hub import FakeHub
from .conftest import BUCKET, FILES, MODEL, REGION, TOKEN, random_bytes

PART = 5 * 1024 * 1024  # S3's smallest part, so the test files go up in several parts


def _stage(hub: FakeHub, destination: str = f"s3://{BUCKET}/tiny/", **options: Any) -> Any:
    options.setdefault("part_size", PART)
    options.setdefault("region", REGION)
    return stage(options.pop("model_id", MODEL), destination, endpoint=hub.url, **options)


def _object(s3: Any, key: str) -> bytes:
    return bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def _keys(s3: Any) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def _writes(s3: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every write the client sends from now on: (operation, parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    lock = threading.Lock()

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in ("PutObject", "CreateMultipartUpload", "UploadPart",
                          "CompleteMultipartUpload", "DeleteObject", "AbortMultipartUpload"):
            with lock:
                seen.append((model.name, {k: v for k, v in params.items() if k != "Body"}))
    s3.meta.events.register("provide-client-params.s3.*", record)
    return seen


# --- the copy ---------------------------------------------------------------------------

def test_every_file_is_copied_byte_for_byte_under_the_prefix(hub: FakeHub, s3: Any) -> None:
    result = _stage(hub, s3=s3)
    assert _keys(s3) == sorted([f"tiny/{p}" for p in FILES] + [f"tiny/{MANIFEST_NAME}"])
    for path, data in FILES.items():
        assert _object(s3, f"tiny/{path}") == data
    assert result.uri == f"s3://{BUCKET}/tiny/"
    assert result.bytes_copied == sum(len(d) for d in FILES.values())
    assert result.commit == hub.repos[MODEL].refs["main"]


def test_the_manifest_is_the_last_write_and_lists_every_file(hub: FakeHub, s3: Any) -> None:
    writes = _writes(s3)
    _stage(hub, s3=s3)
    completed = [(op, p["Key"]) for op, p in writes
                 if op in ("PutObject", "CompleteMultipartUpload")]
    assert completed[-1] == ("PutObject", f"tiny/{MANIFEST_NAME}")
    assert len(completed) == len(FILES) + 1
    manifest = json.loads(_object(s3, f"tiny/{MANIFEST_NAME}"))
    assert manifest["model_id"] == MODEL and manifest["revision"] == "main"
    assert manifest["commit"] == hub.repos[MODEL].refs["main"]
    import hashlib
    assert {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]} == {
        p: (len(d), hashlib.sha256(d).hexdigest()) for p, d in FILES.items()}


def test_large_files_go_up_in_parts_each_with_its_sha256_checked_by_s3(hub: FakeHub,
                                                                       s3: Any) -> None:
    writes = _writes(s3)
    _stage(hub, s3=s3)
    key = "tiny/model-00001-of-00002.safetensors"
    created = [p for op, p in writes if op == "CreateMultipartUpload" and p["Key"] == key]
    assert created and created[0]["ChecksumAlgorithm"] == "SHA256"
    parts = [p for op, p in writes if op == "UploadPart" and p["Key"] == key]
    assert len(parts) == 3  # 11 MiB + 17 bytes in 5 MiB parts
    assert all(len(p["ChecksumSHA256"]) == 44 for p in parts)  # base64 of 32 bytes
    (done,) = [p for op, p in writes if op == "CompleteMultipartUpload" and p["Key"] == key]
    assert done["MpuObjectSize"] == len(FILES["model-00001-of-00002.safetensors"])
    assert [p["ChecksumSHA256"] for p in done["MultipartUpload"]["Parts"]] == \
        [p["ChecksumSHA256"] for p in parts]
    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["Metadata"]["sha256"] == hub.repos[MODEL].commits[
        hub.repos[MODEL].refs["main"]]["model-00001-of-00002.safetensors"][0].sha256


def test_the_token_goes_to_the_hub_and_never_to_the_cdn(hub: FakeHub, s3: Any) -> None:
    hub.tokens.add(TOKEN)
    _stage(hub, s3=s3, token=TOKEN)
    assert all(authorized for server, _, _, authorized, _ in hub.requests if server == "hub")
    cdn = [authorized for server, _, _, authorized, _ in hub.requests if server == "cdn"]
    assert cdn and not any(cdn)  # the redirect to another origin drops Authorization


def test_exclude_leaves_paths_out_and_the_manifest_says_so(hub: FakeHub, s3: Any) -> None:
    _stage(hub, s3=s3, exclude=["original/*"])
    assert "tiny/original/consolidated.00.pth" not in _keys(s3)
    staged = check_staged(f"s3://{BUCKET}/tiny/", region=REGION, s3=s3)
    assert staged.manifest.excluded == ("original/*",)
    assert "original/consolidated.00.pth" not in {f.path for f in staged.manifest.files}


def test_dry_run_lists_what_it_would_copy_and_writes_nothing(hub: FakeHub, s3: Any) -> None:
    result = _stage(hub, s3=s3, dry_run=True)
    assert result.dry_run and _keys(s3) == []
    assert sorted(f.path for f in result.copied) == sorted(FILES)
    assert hub.served("cdn") == []


def test_sse_kms_is_asked_for_every_object(hub: FakeHub, s3: Any) -> None:
    key_id = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    _stage(hub, s3=s3, kms_key_id=key_id)
    for key in _keys(s3):
        head = s3.head_object(Bucket=BUCKET, Key=key)
        assert head["ServerSideEncryption"] == "aws:kms", key
        assert key_id in head["SSEKMSKeyId"], key


# --- resuming -----------------------------------------------------------------------------

def test_a_rerun_copies_nothing_and_keeps_the_manifest(hub: FakeHub, s3: Any) -> None:
    _stage(hub, s3=s3)
    served = len(hub.served("cdn")) + len(hub.served("hub"))
    events: list[StageEvent] = []
    result = _stage(hub, s3=s3, on_event=events.append)
    assert result.copied == () and len(result.skipped) == len(FILES)
    assert result.bytes_copied == 0
    # only the model info was asked again; no file was downloaded
    assert len(hub.served("cdn")) + len(hub.served("hub")) == served + 1
    assert sorted(e.path for e in events if e.kind == "skipped") == sorted(FILES)
    check_staged(f"s3://{BUCKET}/tiny/", model_id=MODEL, revision="main", s3=s3)


def test_an_interrupted_copy_resumes_with_only_the_missing_file(hub: FakeHub, s3: Any) -> None:
    broken = "model-00001-of-00002.safetensors"
    hub.fault(broken, cut_after=7 * 1024 * 1024)  # every answer stops 7 MiB in
    with pytest.raises(WeightsError, match=rf"1 of 6 file\(s\) were not copied; no manifest "
                       rf"was written\. Run the same command again(?s:.*){broken}"):
        _stage(hub, s3=s3)
    assert f"tiny/{broken}" not in _keys(s3)
    assert f"tiny/{MANIFEST_NAME}" not in _keys(s3)
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []  # aborted
    with pytest.raises(WeightsError, match="has no lmikit-manifest.json"):
        check_staged(f"s3://{BUCKET}/tiny/", s3=s3)

    hub.faults.clear()
    before = len(hub.served("cdn"))
    writes = _writes(s3)
    result = _stage(hub, s3=s3)
    assert [f.path for f in result.copied] == [broken]
    assert len(hub.served("cdn")) == before + 1  # the one missing file, nothing else
    written = [p["Key"] for op, p in writes if op in ("PutObject", "CompleteMultipartUpload")]
    assert written == [f"tiny/{broken}", f"tiny/{MANIFEST_NAME}"]
    assert _object(s3, f"tiny/{broken}") == FILES[broken]
    check_staged(f"s3://{BUCKET}/tiny/", model_id=MODEL, s3=s3)


def test_a_download_that_breaks_once_resumes_at_the_byte_it_broke(hub: FakeHub,
                                                                  s3: Any) -> None:
    path = "model-00002-of-00002.safetensors"
    hub.fault(path, cut_after=300_000, times=1)
    _stage(hub, s3=s3)
    ranges = [r for server, _, _, _, r in hub.requests if server == "cdn" and r]
    assert ranges == ["bytes=300000-"]
    assert _object(s3, f"tiny/{path}") == FILES[path]


def test_ctrl_c_stops_the_copy_aborts_its_uploads_and_writes_no_manifest(hub: FakeHub,
                                                                        s3: Any) -> None:
    stop = threading.Event()

    def stop_midway(event: StageEvent) -> None:
        if event.kind == "bytes" and event.path.startswith("model-00001"):
            stop.set()
    with pytest.raises(Interrupted, match="no manifest written; run the same command again"):
        _stage(hub, s3=s3, stop=stop, on_event=stop_midway, workers=1)
    assert "tiny/model-00001-of-00002.safetensors" not in _keys(s3)
    assert f"tiny/{MANIFEST_NAME}" not in _keys(s3)
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_an_upload_a_killed_run_left_unfinished_is_aborted(hub: FakeHub, s3: Any) -> None:
    key = "tiny/model-00002-of-00002.safetensors"
    s3.create_multipart_upload(Bucket=BUCKET, Key=key)
    events: list[StageEvent] = []
    _stage(hub, s3=s3, on_event=events.append)
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert any("aborted 1 unfinished upload" in e.message for e in events)


def test_restaging_another_revision_removes_the_old_manifest_before_any_file(
        hub: FakeHub, s3: Any) -> None:
    _stage(hub, s3=s3)
    repo = hub.repos[MODEL]
    repo.commit({**FILES, "model-00002-of-00002.safetensors": random_bytes(1024 * 1024, 9)})
    writes = _writes(s3)
    hub.fault("model-00002-of-00002.safetensors", cut_after=1024)
    with pytest.raises(WeightsError, match="were not copied"):
        _stage(hub, s3=s3)
    assert writes[0] == ("DeleteObject", {"Bucket": BUCKET, "Key": f"tiny/{MANIFEST_NAME}"})
    with pytest.raises(WeightsError, match="has no lmikit-manifest.json"):
        check_staged(f"s3://{BUCKET}/tiny/", s3=s3)
    hub.faults.clear()
    result = _stage(hub, s3=s3)
    assert [f.path for f in result.copied] == ["model-00002-of-00002.safetensors"]
    assert check_staged(f"s3://{BUCKET}/tiny/", s3=s3).manifest.commit == repo.refs["main"]


def test_an_object_of_the_right_size_but_other_bytes_is_copied_again(hub: FakeHub,
                                                                    s3: Any) -> None:
    path = "model-00002-of-00002.safetensors"
    s3.put_object(Bucket=BUCKET, Key=f"tiny/{path}", Body=bytes(len(FILES[path])))
    result = _stage(hub, s3=s3)
    assert path in {f.path for f in result.copied}
    assert _object(s3, f"tiny/{path}") == FILES[path]


# --- refusals -----------------------------------------------------------------------------

def test_bytes_that_do_not_match_the_hubs_sha256_are_refused(hub: FakeHub, s3: Any) -> None:
    path = "model-00001-of-00002.safetensors"
    hub.fault(path, corrupt=True)
    with pytest.raises(WeightsError, match=rf"{path}: the streamed bytes have sha256 [0-9a-f]"
                       r"{64}, the Hub publishes [0-9a-f]{64}; refused"):
        _stage(hub, s3=s3)
    assert f"tiny/{path}" not in _keys(s3)
    assert f"tiny/{MANIFEST_NAME}" not in _keys(s3)
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_a_file_kept_in_git_is_checked_against_its_blob_id(hub: FakeHub, s3: Any) -> None:
    hub.fault("config.json", corrupt=True)
    with pytest.raises(WeightsError, match=r"config.json: the streamed bytes have git blob id "
                       r"[0-9a-f]{40}, the Hub lists [0-9a-f]{40}; refused"):
        _stage(hub, s3=s3)
    assert "tiny/config.json" not in _keys(s3)


def test_a_gated_repo_without_a_token_names_every_fix_and_writes_nothing(hub: FakeHub,
                                                                        s3: Any) -> None:
    hub.add_repo("org/gated", FILES, gated="manual")
    with pytest.raises(WeightsError) as caught:
        _stage(hub, s3=s3, model_id="org/gated")
    message = str(caught.value)
    assert message.startswith("org/gated is a gated repo and no Hub token was given")
    for fix in (f"{hub.url}/org/gated", "HF_TOKEN", "--token-secret ARN"):
        assert fix in message
    assert _keys(s3) == [] and hub.served("cdn") == []


def test_a_dry_run_of_a_gated_repo_without_a_token_notes_it(hub: FakeHub, s3: Any) -> None:
    hub.add_repo("org/gated", FILES, gated="auto")
    result = _stage(hub, s3=s3, model_id="org/gated", dry_run=True,
                    exclude=(p for p in ["original/*"]))
    assert result.notes and result.notes[0].startswith("org/gated is a gated repo and no Hub "
                                                       "token was given")
    assert len(result.copied) == len(FILES) - 1 and _keys(s3) == []


def test_a_token_not_granted_a_gated_repo_gets_the_hubs_403_in_words(hub: FakeHub,
                                                                    s3: Any) -> None:
    hub.add_repo("org/gated", FILES, gated="auto")
    hub.tokens.add(TOKEN)
    with pytest.raises(WeightsError, match=r"org/gated is a gated repo and the token's Hub "
                       rf"account has not been granted access: ask for it at {hub.url}/org/"
                       "gated"):
        _stage(hub, s3=s3, model_id="org/gated", token=TOKEN)
    assert f"tiny/{MANIFEST_NAME}" not in _keys(s3)


def test_a_granted_token_copies_a_gated_repo(hub: FakeHub, s3: Any) -> None:
    hub.add_repo("org/gated", FILES, gated="manual").granted.add(TOKEN)
    hub.tokens.add(TOKEN)
    _stage(hub, s3=s3, model_id="org/gated", token=TOKEN)
    assert check_staged(f"s3://{BUCKET}/tiny/", model_id="org/gated", s3=s3)


def test_a_401_without_a_token_on_a_file_is_the_gated_message(hub: FakeHub, s3: Any) -> None:
    """The Hub's listing hides nothing, but its file answers do: a repo gated after the
    listing still gets the words that name the fixes."""
    repo = hub.add_repo("org/late-gate", FILES)
    events: list[StageEvent] = []

    def gate(event: StageEvent) -> None:
        if event.kind == "listed":
            repo.gated = "manual"
        events.append(event)
    with pytest.raises(WeightsError, match="no Hub token was given: accept its terms"):
        _stage(hub, s3=s3, model_id="org/late-gate", on_event=gate, workers=1)


def test_a_token_the_hub_refuses_is_named(hub: FakeHub, s3: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(WeightsError, match=r"the Hub refused the token \(401 Invalid "
                       r"credentials in Authorization header\): check HF_TOKEN"):
        _stage(hub, s3=s3)


def test_a_missing_repo_is_named(hub: FakeHub, s3: Any) -> None:
    with pytest.raises(WeightsError, match=r"no model 'org/nope' on the Hub at http://"
                       r"127\.0\.0\.1:\d+, or it is private"):
        _stage(hub, s3=s3, model_id="org/nope")


def test_a_missing_revision_is_named(hub: FakeHub, s3: Any) -> None:
    with pytest.raises(WeightsError, match=r"org/tiny-model has no revision 'v9' on the Hub: "
                       "give a branch, a tag or a full commit sha"):
        _stage(hub, s3=s3, revision="v9")


def test_a_commit_sha_is_a_revision(hub: FakeHub, s3: Any) -> None:
    sha = hub.repos[MODEL].refs["main"]
    result = _stage(hub, s3=s3, revision=sha)
    assert result.commit == sha
    assert check_staged(f"s3://{BUCKET}/tiny/", revision=sha, s3=s3)


def test_a_malformed_model_id_is_named(hub: FakeHub, s3: Any) -> None:
    with pytest.raises(WeightsError, match=r"model id 'org//x' is not a Hub repo id"):
        _stage(hub, s3=s3, model_id="org//x")


@pytest.mark.parametrize(("uri", "says"), [
    ("my-bucket/models/", "is not an s3:// URI"),
    ("s3://My_Bucket/models/", "is not a valid S3 bucket name"),
    ("s3://staged-models/a//b/", "folder or file name ''"),
    ("s3://staged-models/a/../b/", "folder or file name '..'"),
    ("s3://staged-models/" + "x" * 1100 + "/", "characters long"),
])
def test_a_bad_destination_is_refused_before_anything_is_asked(hub: FakeHub, s3: Any,
                                                               uri: str, says: str) -> None:
    with pytest.raises(WeightsError, match=says):
        _stage(hub, uri, s3=s3)
    assert hub.requests == []


def test_a_missing_bucket_is_named(hub: FakeHub, s3: Any) -> None:
    with pytest.raises(WeightsError, match="bucket 'no-such-bucket' does not exist"):
        _stage(hub, "s3://no-such-bucket/m/", s3=s3)


def test_a_bucket_in_another_region_is_refused(hub: FakeHub, s3: Any) -> None:
    boto3.client("s3", region_name="eu-west-1").create_bucket(
        Bucket="eu-models", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    with pytest.raises(WeightsError, match="bucket eu-models is in eu-west-1, not us-east-1: "
                       "SageMaker reads model data only from a bucket in the endpoint's "
                       "region"):
        _stage(hub, "s3://eu-models/m/", s3=s3)


def test_a_repo_path_named_like_the_manifest_is_refused(hub: FakeHub, s3: Any) -> None:
    hub.add_repo("org/clash", {MANIFEST_NAME: b"{}", "config.json": b"{}"})
    with pytest.raises(WeightsError, match="named like lmikit's manifest"):
        _stage(hub, s3=s3, model_id="org/clash")


def test_excluding_everything_is_refused(hub: FakeHub, s3: Any) -> None:
    with pytest.raises(WeightsError, match="has no file left to stage"):
        _stage(hub, s3=s3, exclude=["*"])


def test_bad_options_are_named(hub: FakeHub, s3: Any) -> None:
    with pytest.raises(WeightsError, match=r"workers is 0; give 1 to 64; part_size is 1,024 "
                       r"bytes; S3 parts are 5,242,880 to"):
        _stage(hub, s3=s3, workers=0, part_size=1024)


# --- the base model's LoRA isolation model.py (--lora-isolation) --------------------------

MODEL_PY = b'"""an isolating model.py"""\n'


def test_model_py_is_written_before_the_manifest_and_listed_in_it(hub: FakeHub,
                                                                  s3: Any) -> None:
    writes = _writes(s3)
    result = _stage(hub, s3=s3, model_py=MODEL_PY)
    assert _object(s3, "tiny/model.py") == MODEL_PY
    completed = [p["Key"] for op, p in writes if op in ("PutObject", "CompleteMultipartUpload")]
    assert completed[-2:] == ["tiny/model.py", f"tiny/{MANIFEST_NAME}"]
    staged = check_staged(f"s3://{BUCKET}/tiny/", s3=s3)
    assert "model.py" in {f.path for f in staged.manifest.files} and staged.extra_keys == ()
    assert any("model.py" in n for n in result.notes)
    again = _writes(s3)
    _stage(hub, s3=s3, model_py=MODEL_PY)  # already there: only the manifest is rewritten
    assert [p["Key"] for op, p in again if op == "PutObject"] == [f"tiny/{MANIFEST_NAME}"]


def test_a_changed_model_py_replaces_the_old_one_and_the_manifest_goes_first(
        hub: FakeHub, s3: Any) -> None:
    _stage(hub, s3=s3, model_py=MODEL_PY)
    writes = _writes(s3)
    _stage(hub, s3=s3, model_py=MODEL_PY + b"# v2\n")
    ops = [(op, p["Key"]) for op, p in writes]
    assert ops[0] == ("DeleteObject", f"tiny/{MANIFEST_NAME}")
    assert _object(s3, "tiny/model.py").endswith(b"# v2\n")


def test_a_repo_with_its_own_model_py_is_not_given_lmikits(hub: FakeHub, s3: Any) -> None:
    hub.add_repo("org/custom-code", {**FILES, "model.py": b"def handle(inputs): ...\n"})
    with pytest.raises(WeightsError, match=r"has its own model.py, .*--exclude model.py"):
        _stage(hub, s3=s3, model_id="org/custom-code", model_py=MODEL_PY)
    assert _keys(s3) == []


def test_a_body_cut_short_counts_as_a_broken_connection_whichever_layer_raises_it() -> None:
    """A cut body can surface as the HTTP client's error or, while a stream is read, as its
    transport's (httpcore's or httpcore2's ``RemoteProtocolError``, unmapped): both are a
    broken connection to resume from, never an unexplained crash."""
    import importlib

    from huggingface_hub import errors

    from lmikit.weights._hub import _broken_connection

    client = errors.HTTPError
    transport = importlib.import_module(
        client.__module__.split(".")[0].replace("httpx", "httpcore", 1))
    caught = _broken_connection()
    assert client in caught and OSError in caught
    for raised in (transport.RemoteProtocolError, transport.ReadError,
                   transport.ReadTimeout):
        assert issubclass(raised, caught), raised
    assert not issubclass(ValueError, caught)
