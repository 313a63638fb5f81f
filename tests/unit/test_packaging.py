"""Adapter packaging: what goes in, what is refused, and that the bytes are today's bytes."""

from __future__ import annotations

import gzip
import io
import os
import socket
import stat
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmikit.artifact import ArtifactFile, TarMember, deterministic_tar
from lmikit.errors import AdapterError
from lmikit.lora._packaging import check_adapter, package_adapter
from lmikit.testing import write_lora_adapter
from tests.conftest import deadline

MODEL = "Qwen/Qwen2.5-7B-Instruct"
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _reference_tar(files: dict[str, bytes]) -> bytes:
    """The in-memory packager lmikit shipped before packaging streamed (kept verbatim as the
    reference: the streamed archive must be byte-identical, or every stored hash changes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        out = {}
        for m in tar.getmembers():
            assert m.isfile(), m.name
            handle = tar.extractfile(m)
            assert handle is not None
            out[m.name] = handle.read()
        return out


def _refused(path: Path, match: str, **kwargs: object) -> AdapterError:
    with deadline(5), pytest.raises(AdapterError, match=match) as info:
        package_adapter(path, **kwargs)  # type: ignore[arg-type]
    return info.value


names = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1,
                max_size=120).filter(lambda n: n not in (".", ".."))


@settings(max_examples=40)
@given(st.dictionaries(st.lists(names, min_size=1, max_size=3).map("/".join),
                       st.binary(max_size=3000), min_size=1, max_size=6))
def test_packaging_streamed_archive_is_byte_identical_to_the_in_memory_one(files):
    reference = _reference_tar(files)
    assert deterministic_tar(files) == reference
    with ArtifactFile.build(TarMember.from_bytes(n, d) for n, d in files.items()) as art:
        assert art.read() == reference
        assert art.size == len(reference)


def test_packaging_package_bytes_equal_the_reference_for_the_same_files(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / "README.md").write_text("# legal adapter\n")
    (d / "sub").mkdir()
    (d / "sub" / "tokenizer.json").write_text("{}")
    package = package_adapter(d, model_id=MODEL, max_rank=16)
    files = {n: (d / n).read_bytes() for n in package.files}
    assert package.data == _reference_tar(files)
    assert package.files == ["README.md", "adapter_config.json", "adapter_model.safetensors",
                             "sub/tokenizer.json"]


def test_packaging_fifo_in_the_adapter_is_refused_without_opening_it(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    os.mkfifo(d / "pipe")
    _refused(d, r"pipe: is a FIFO \(named pipe\); an adapter holds regular files only")
    with deadline(5), pytest.raises(AdapterError, match="pipe: is a FIFO"):
        check_adapter(d)


def test_packaging_fifo_named_like_the_config_is_refused(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / "adapter_config.json").unlink()
    os.mkfifo(d / "adapter_config.json")
    error = _refused(d, "adapter_config.json: is a FIFO")
    assert "is missing" in str(error)  # and no config was read from it


def test_packaging_socket_is_refused(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(d / "sock"))
        _refused(d, "sock: is a socket")


def test_packaging_device_is_refused(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / "zeros").symlink_to("/dev/zero")
    _refused(d, r"zeros: is a symlink to '/dev/zero', outside the adapter directory")
    (d / "zeros").unlink()
    try:
        os.mknod(d / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:  # pragma: no cover - needs CAP_MKNOD
        pytest.skip("cannot create a device node here")
    _refused(d, "zero: is a character device")


def test_packaging_symlink_outside_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("aws_secret_access_key=x")
    d = write_lora_adapter(tmp_path / "a")
    (d / "notes.txt").symlink_to(secret)
    _refused(d, "notes.txt: is a symlink to .*secret.txt', outside the adapter directory")


def test_packaging_symlink_to_a_file_inside_is_packaged_as_a_copy(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / "real").mkdir()
    (d / "real" / "tokenizer.json").write_text('{"v": 1}')
    (d / "tokenizer.json").symlink_to("real/tokenizer.json")
    package = package_adapter(d)
    members = _members(package.data)
    assert members["tokenizer.json"] == members["real/tokenizer.json"] == b'{"v": 1}'
    assert any("tokenizer.json: a symlink, packaged as a copy" in n for n in package.notes)


def test_packaging_symlink_to_a_folder_or_dangling_is_refused(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / "real").mkdir()
    (d / "alias").symlink_to("real")
    (d / "gone").symlink_to("nothing-here")
    error = _refused(d, "alias: is a symlink to something that is not a regular file")
    assert "gone: is a symlink that cannot be followed" in str(error)


def test_packaging_symlink_to_an_excluded_file_is_excluded(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / ".env").write_text("HF_TOKEN=hf_x")
    (d / "settings.txt").symlink_to(".env")
    package = package_adapter(d)
    assert "settings.txt" not in package.files
    assert package.excluded == (".env", "settings.txt (a symlink to .env)")


def test_packaging_hard_link_to_a_file_outside_is_refused(tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("[default]\naws_secret_access_key=x\n")
    d = write_lora_adapter(tmp_path / "a")
    os.link(secret, d / "extra.bin")
    _refused(d, "extra.bin: has 1 hard link.s. outside the adapter directory")


def test_packaging_hard_links_inside_the_directory_are_fine(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / "one.txt").write_text("same")
    os.link(d / "one.txt", d / "two.txt")
    members = _members(package_adapter(d).data)
    assert members["one.txt"] == members["two.txt"] == b"same"


def test_packaging_secrets_and_clutter_are_excluded_and_listed(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    for name in (".env", "server.pem", "tls.key", "id_rsa", "id_ed25519.pub", "credentials",
                 "cert.p12", ".netrc", "x.pyc"):
        (d / name).write_text("secret")
    for folder in (".git", ".aws", "__pycache__", ".ssh"):
        (d / folder).mkdir()
        (d / folder / "config").write_text("secret")
    package = package_adapter(d)
    assert package.files == ["adapter_config.json", "adapter_model.safetensors"]
    assert set(package.excluded) == {
        ".env", "server.pem", "tls.key", "id_rsa", "id_ed25519.pub", "credentials",
        "cert.p12", ".netrc", "x.pyc", ".git/", ".aws/", "__pycache__/", ".ssh/"}
    assert set(_members(package.data)) == set(package.files)


def test_packaging_include_puts_an_excluded_file_back(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    (d / ".env").write_text("MODE=legal")
    (d / "x.key").write_text("k")
    package = package_adapter(d, include=[".env"])
    assert ".env" in package.files and package.excluded == ("x.key",)
    assert _members(package.data)[".env"] == b"MODE=legal"


def test_packaging_missing_directory_is_one_clear_problem(tmp_path):
    error = _refused(tmp_path / "nowhere", "cannot read the adapter directory: No such file")
    assert len(error.problems) == 1


def test_packaging_changed_file_during_packaging_is_refused(tmp_path, monkeypatch):
    """The cache tag digests each file before the archive is written; a file that changes
    in between would ship bytes the tag does not describe."""
    import lmikit.lora._packaging as packaging

    d = write_lora_adapter(tmp_path / "a")
    real = packaging._digest

    def digest_then_change(entry):
        out = real(entry)
        if entry.name == "adapter_model.safetensors":
            data = bytearray((d / entry.name).read_bytes())
            data[-1] ^= 0xFF
            (d / entry.name).write_bytes(bytes(data))
        return out

    monkeypatch.setattr(packaging, "_digest", digest_then_change)
    with pytest.raises(AdapterError, match="changed while it was being packaged"):
        package_adapter(d, cache_tag_name="legal")


def test_packaging_memory_stays_flat_for_large_weights(tmp_path):
    """Rule: packaging holds buffers, not the adapter: peak Python memory stays under
    16 MB for 64 MB of weights (the in-memory packager needed about 4x the adapter)."""
    d = write_lora_adapter(tmp_path / "a", target_modules=ALL_LINEAR, layers=range(28), rank=16)
    size = (d / "adapter_model.safetensors").stat().st_size
    assert size > 64 * 2**20
    tracemalloc.start()
    try:
        package = package_adapter(d, model_id=MODEL, max_rank=16, cache_tag_name="legal")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak
    assert package.size > 0 and len(package.sha256) == 64


def test_packaging_check_reads_a_bounded_amount(tmp_path):
    """Rule: the check-only pass (validate) reads the config and the safetensors header,
    never the weights: under 2 MB of Python memory for 64 MB of weights."""
    d = write_lora_adapter(tmp_path / "a", target_modules=ALL_LINEAR, layers=range(28), rank=16)
    tracemalloc.start()
    try:
        check = check_adapter(d, model_id=MODEL, max_rank=16, cache_tag_name="legal")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20, peak
    assert check.files == ["adapter_config.json", "adapter_model.safetensors", "model.py"]


def test_packaging_package_can_be_read_again_after_an_upload_closed_its_reader(tmp_path):
    d = write_lora_adapter(tmp_path / "a")
    package = package_adapter(d, model_id="Qwen/Qwen2.5-7B-Instruct", max_rank=16)
    with package.open() as first:
        data = first.read()
    with package.open() as again:  # a retried upload
        assert again.read() == data
    assert package.data == data and len(data) == package.size
