"""`lmikit validate` checks the files a spec names as deploy would, without AWS: every
problem once, with its field, the spec's file and line, the value and what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lmikit.accept._accept import TARGETS, accept_spec
from lmikit.cli import main
from lmikit.errors import AdapterError
from lmikit.testing import write_lora_adapter
from tests.conftest import deadline

HEAD = """api_version: v1
name: docqa
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
"""
FORMATTER = """from lmikit.formatters import output_formatter

@output_formatter
def same(output):
    return output
"""


def _cli(*args: str):
    with deadline(20):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _spec(root: Path, body: str) -> Path:
    path = root / "spec.yaml"
    path.write_text(HEAD + body)
    return path


def _problem_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("  - ")]


def test_accept_files_every_adapter_problem_once_with_its_line(tmp_path):
    write_lora_adapter(tmp_path / "adapters" / "llama",
                       base_model="meta-llama/Llama-3.1-8B-Instruct")
    write_lora_adapter(tmp_path / "adapters" / "wide", rank=64)
    (tmp_path / "empty.py").write_text("x = 1\n")
    path = _spec(tmp_path, """adapters:
  - name: missing
    source: adapters/missing
  - name: llama
    source: adapters/llama
  - name: wide
    source: adapters/wide
  - name: fmt
    source: adapters/wide
    formatter: empty.py
""")
    result = _cli("validate", str(path))
    assert result.exit_code == 2
    lines = _problem_lines(result.output)
    assert result.output.startswith(f"AdapterError: {len(lines)} problem(s) in the files "
                                    f"{path} names")
    assert len(lines) == len(set(lines))
    text = "\n".join(lines)
    assert (f"  - adapters.0.source ({path}:10): cannot read the adapter directory: No such "
            "file or directory [got 'adapters/missing']") in text
    assert (f"  - adapters.1.source ({path}:12): the adapter was trained for "
            "'meta-llama/Llama-3.1-8B-Instruct', but the endpoint serves "
            "'Qwen/Qwen2.5-7B-Instruct' [got 'adapters/llama']") in text
    assert f"  - adapters.2.source ({path}:14): LoRA rank 64 exceeds the endpoint's max " \
        "LoRA rank 16 (OPTION_MAX_LORA_RANK)" in text
    assert f"  - adapters.3.source ({path}:16): LoRA rank 64 exceeds" in text
    assert f"  - adapters.3.formatter ({path}:17): formatter " in text
    assert len(lines) == 5
    assert "defines no formatter" in text and "[got 'empty.py']" in text


def test_accept_files_refused_by_render_of_any_target_and_by_deploy(tmp_path):
    path = str(_spec(tmp_path, "adapters:\n  - name: a\n    source: nowhere\n"))
    validate = _cli("validate", path)
    assert validate.exit_code == 2
    for target in TARGETS:
        render = _cli("render", path, "-t", target)
        assert (render.exit_code, render.output) == (2, validate.output)
    deploy = _cli("deploy", path, "--role-arn", "arn:aws:iam::123456789012:role/r",
                  "--bucket", "b")
    assert (deploy.exit_code, deploy.output) == (2, validate.output)


def test_accept_files_rank_given_in_the_spec_raises_the_limit(tmp_path):
    write_lora_adapter(tmp_path / "wide", rank=64)
    path = _spec(tmp_path, "adapters:\n  - name: wide\n    source: wide\n    rank: 64\n")
    assert accept_spec(path, ("env",)).rendered["env"]


def test_accept_files_fifo_adapter_and_formatter_do_not_hang(tmp_path):
    os.mkfifo(tmp_path / "fmt.py")
    write_lora_adapter(tmp_path / "a")
    os.mkfifo(tmp_path / "a" / "adapter_model.safetensors.tmp")
    path = _spec(tmp_path, "adapters:\n  - name: a\n    source: a\n    formatter: fmt.py\n"
                 "formatters:\n  input: fmt.py\n")
    result = _cli("validate", str(path))
    assert result.exit_code == 2
    assert "adapter_model.safetensors.tmp: is a FIFO" in result.output
    assert "adapters.0.formatter" in result.output and "formatters.input" in result.output
    assert result.output.count("is not a regular file (it is a FIFO") == 2


def test_accept_files_base_formatter_missing_kind_names_the_field(tmp_path):
    (tmp_path / "out.py").write_text(FORMATTER)
    path = _spec(tmp_path, "formatters:\n  input: out.py\n  output: gone.py\n")
    with pytest.raises(AdapterError) as info:
        accept_spec(path)
    text = str(info.value)
    assert f"formatters.input ({path}:9): formatter " in text
    assert "has no input formatter, but the spec names this file as one" in text
    assert f"formatters.output ({path}:10): formatter " in text
    assert "gone.py': cannot read it: No such file or directory" in text


def test_accept_files_valid_adapter_and_formatter_pass(tmp_path):
    write_lora_adapter(tmp_path / "a")
    (tmp_path / "fmt.py").write_text(FORMATTER)
    path = _spec(tmp_path, "adapters:\n  - name: a\n    source: a\n    formatter: fmt.py\n"
                 "formatters:\n  output: fmt.py\n")
    # HyperPod refuses LoRA next to the operator's KV cache (test_render_hyperpod.py)
    result = _cli("validate", str(path), "--target", "sagemaker")
    assert result.exit_code == 0, result.output


def test_accept_files_s3_adapter_is_noted_not_inspected(tmp_path):
    path = _spec(tmp_path, "kv_cache:\n  mode: 'off'\nadapters:\n  - name: a\n"
                 "    source: s3://bucket/a.tar.gz\n")
    accepted = accept_spec(path)
    assert any("adapters.0.source 's3://bucket/a.tar.gz': an uploaded adapter is not "
               "inspected" in n for n in accepted.notes)


@pytest.mark.parametrize("source", ["../../..", "..", ".", "adapters/../..", "/", "/etc"])
def test_an_adapter_source_outside_the_specs_folder_is_refused_before_it_is_walked(
        tmp_path, monkeypatch, source):
    """The spec's folder is the one root a spec's adapters come from: a source that climbs
    out (or names the folder itself) is refused on its name; nothing under it is listed."""
    import lmikit.lora._packaging

    walked: list[Path] = []
    real = lmikit.lora._packaging.scan_adapter_dir

    def scan(root, include=()):
        walked.append(Path(root))
        return real(root, include)

    monkeypatch.setattr(lmikit.lora._packaging, "scan_adapter_dir", scan)
    folder = tmp_path / "deep" / "specs"
    folder.mkdir(parents=True)
    write_lora_adapter(folder / "adapters" / "legal")
    path = _spec(folder, f"""adapters:
  - name: legal
    source: adapters/legal
  - name: outside
    source: '{source}'
""")
    with pytest.raises(AdapterError) as info:
        accept_spec(path, ("lmcache",))
    assert walked == [folder / "adapters" / "legal"]  # the inside one only
    (problem,) = _problem_lines(str(info.value))
    assert problem.startswith(f"  - adapters.1.source ({path}:12): ")
    assert "a spec's adapter folders lie inside the folder that holds the spec: move the " \
        "adapter there (or a symlink to it), or give an s3:// URI" in problem


def test_an_adapter_behind_a_symlink_inside_the_specs_folder_is_packaged(tmp_path):
    """The rule is on the names a spec gives: a link someone put in the folder may lead
    anywhere (weights on another disk)."""
    write_lora_adapter(tmp_path / "elsewhere" / "legal")
    folder = tmp_path / "specs"
    (folder / "adapters").mkdir(parents=True)
    (folder / "adapters" / "legal").symlink_to(tmp_path / "elsewhere" / "legal")
    path = _spec(folder, "adapters:\n  - name: legal\n    source: adapters/legal\n")
    assert accept_spec(path, ("lmcache",)).spec.adapters[0].name == "legal"


def test_validate_of_64_climbing_adapters_lists_the_first_twenty_problems_and_a_count(
        tmp_path, monkeypatch):
    import lmikit.lora._packaging
    from lmikit.errors import MAX_LISTED_PROBLEMS

    assert MAX_LISTED_PROBLEMS == 20
    monkeypatch.setattr(lmikit.lora._packaging, "scan_adapter_dir",
                        lambda *a, **k: pytest.fail("a refused source was walked"))
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    adapters = "".join(f"  - {{name: a{i}, source: ../../..}}\n" for i in range(64))
    result = CliRunner().invoke(main, ["validate", str(_spec(folder, "adapters:\n" + adapters))])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == f"AdapterError: 64 problem(s) in the files {folder / 'spec.yaml'} names"
    assert len(_problem_lines(result.output)) == 20
    assert lines[1].startswith("  - adapters.0.source") \
        and lines[20].startswith("  - adapters.19.source")
    assert lines[21:] == ["  ... and 44 more"]
