"""The pure parts of weights staging: destination rules, part sizes, regrouping a stream
into parts, the skip rule, and the docstring examples."""

from __future__ import annotations

import doctest
import hashlib
import importlib
import threading

import pytest

from lmikit.weights import HubFile, parse_destination
from lmikit.weights._destination import MAX_KEY_BYTES, path_problems
from lmikit.weights._upload import (
    MAX_PARTS,
    MIN_PART,
    Stopped,
    _parts,
    git_blob_id,
    part_size_for,
    stored_sha256,
)

MIB = 1024 * 1024


@pytest.mark.parametrize("name", ["lmikit.weights", "lmikit.weights._destination",
                                  "lmikit.weights._manifest", "lmikit.weights._upload"])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_a_prefix_gets_its_trailing_slash_as_sagemakers_s3prefix_needs() -> None:
    """botocore, S3ModelDataSource.S3DataType: a valid key name prefix ends with '/'."""
    assert parse_destination("s3://my-models/a/b").uri == "s3://my-models/a/b/"
    assert parse_destination("s3://my-models/a/b/").prefix == "a/b/"
    assert parse_destination("s3://my-models").prefix == ""


def test_file_names_follow_sagemakers_rules() -> None:
    """botocore, S3ModelDataSource.CompressionType: no empty name, NUL byte, '.' or '..',
    none over 255 bytes; S3: a key of at most 1,024 bytes."""
    at = parse_destination("s3://my-models/m/")
    assert path_problems(at, "config.json") == []
    assert path_problems(at, "a/./b")[0].startswith("it has a folder or file name '.'")
    assert "holds a NUL byte" in path_problems(at, "a\0b")[0]
    assert "longer than 255 bytes" in path_problems(at, "x" * 256)[0]
    assert path_problems(at, "x" * 255) == []
    deep = "/".join(["y" * 200] * 6)
    assert any(f"S3 allows {MAX_KEY_BYTES}" in p for p in path_problems(at, deep))


def test_part_size_keeps_every_file_within_s3s_10000_parts() -> None:
    """S3 User Guide, multipart upload limits: at most 10,000 parts of 5 MiB to 5 GiB."""
    for size in (1, 5 * MIB, 160 * 1024**3, 700 * 1024**3, 5 * 1024**4):
        part = part_size_for(size, 16 * MIB)
        assert -(-size // part) <= MAX_PARTS and part % MIB == 0 and part >= MIN_PART
    assert part_size_for(10 * 1024**3, 16 * MIB) == 16 * MIB


def test_a_stream_is_regrouped_into_parts_of_exactly_the_part_size() -> None:
    data = bytes(range(256)) * 100  # 25,600 bytes in uneven chunks
    chunks = [data[i:i + 999] for i in range(0, len(data), 999)]
    parts = list(_parts(chunks, 4096, len(data), threading.Event()))
    assert [len(p) for p in parts] == [4096] * 6 + [1024]
    assert b"".join(parts) == data


def test_bytes_past_the_listed_size_come_as_one_more_part_to_refuse() -> None:
    parts = list(_parts([b"a" * 10, b"b" * 5], 8, 10, threading.Event()))
    assert sum(len(p) for p in parts) == 15


def test_a_set_stop_ends_the_stream() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        list(_parts([b"x"], 8, 1, stop))


def test_git_blob_id_is_gits() -> None:
    """``git hash-object`` of an empty file and of "hello\\n" (git's own well-known ids)."""
    assert git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


LFS = HubFile("model.safetensors", 100, "a" * 64, "p" * 40)
IN_GIT = HubFile("config.json", 10, None, "b" * 40)


@pytest.mark.parametrize(("head", "file", "kms", "skip"), [
    ({"ContentLength": 100, "Metadata": {"sha256": "a" * 64}}, LFS, None, True),
    ({"ContentLength": 99, "Metadata": {"sha256": "a" * 64}}, LFS, None, False),
    ({"ContentLength": 100, "Metadata": {"sha256": "c" * 64}}, LFS, None, False),
    ({"ContentLength": 100, "Metadata": {}}, LFS, None, False),
    ({"ContentLength": 10, "Metadata": {"sha256": "d" * 64, "git-blob": "b" * 40}}, IN_GIT,
     None, True),
    ({"ContentLength": 10, "Metadata": {"sha256": "d" * 64, "git-blob": "e" * 40}}, IN_GIT,
     None, False),
    ({"ContentLength": 100, "Metadata": {"sha256": "a" * 64}}, LFS, "alias/k", False),
    ({"ContentLength": 100, "Metadata": {"sha256": "a" * 64},
      "ServerSideEncryption": "aws:kms"}, LFS, "alias/k", True),
    (None, LFS, None, False),
])
def test_an_object_is_skipped_only_when_it_holds_the_hubs_file(head: dict | None,
                                                               file: HubFile, kms: str | None,
                                                               skip: bool) -> None:
    assert (stored_sha256(head, file, kms) is not None) == skip


def test_the_sha256_a_skipped_in_git_file_brings_is_its_own() -> None:
    data = b"0123456789"
    head = {"ContentLength": 10, "Metadata": {"sha256": hashlib.sha256(data).hexdigest(),
                                              "git-blob": git_blob_id(data)}}
    file = HubFile("config.json", 10, None, git_blob_id(data))
    assert stored_sha256(head, file, None) == hashlib.sha256(data).hexdigest()
