"""Hostile spec input: every one ends in a SpecError naming what is wrong, quickly.

Speed and memory are measured in benchmarks/hostile_inputs.py; here a memory rlimit and a
deadline only turn a blow-up or a hang into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lmikit.errors import SpecError
from lmikit.spec._loader import (
    MAX_NUMBER_CHARS,
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_NODES,
    load_spec,
    load_spec_text,
    validate_data,
)
from tests.conftest import DEFAULT_SPEC, deadline

BASE = DEFAULT_SPEC.read_text()


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: 9 aliases per level, 9 ** levels values in all."""
    lines = ["api_version: v1", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _with(line: str) -> str:
    """The default spec with its name line replaced."""
    return BASE.replace("name: docqa-qwen7b", line)


def test_load_spec_alias_bomb_is_refused_under_a_memory_limit(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs())
    assert bomb.stat().st_size < 800  # a few hundred bytes standing for 9 ** 9 values
    child = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB of address space
        from lmikit.errors import SpecError
        from lmikit.spec._loader import load_spec
        try:
            load_spec({str(bomb)!r})
        except SpecError as exc:
            print(exc)
            sys.exit(0)
        sys.exit("no SpecError")
    """)
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert f"expands to more than {MAX_SPEC_NODES:,} values" in result.stdout
    assert "bomb.yaml:" in result.stdout


def test_load_spec_aliases_within_the_budget_are_expanded():
    text = _with("name: &n docqa-qwen7b").replace("team: ml-platform", "team: *n")
    assert load_spec_text(text, "aliases.yaml").tags == {"team": "docqa-qwen7b"}


def test_load_spec_alias_that_contains_itself_is_refused():
    with pytest.raises(SpecError, match=r"name\.0 \(self.yaml:5\): alias \*a refers to a "
                       "value that contains it"):
        load_spec_text(_with("name: &a [*a]"), "self.yaml")


@pytest.mark.parametrize("text", [
    "name: " + "[" * 10_000,
    "name: " + "{a: " * 10_000,
    "name:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)),
    "name: {" + "{" * 5_000,  # mappings as keys: nesting that has no field path
])
def test_load_spec_deep_nesting_is_refused_before_recursion_fails(text):
    with deadline(5), pytest.raises(SpecError, match=f"nests deeper than {MAX_SPEC_DEPTH}"):
        load_spec_text(_with(text), "deep.yaml")


def _nested(lists: int) -> str:
    """The default spec with tags.team set to ``lists`` nested lists around 1: the document
    is then 2 + lists + 1 levels deep (top mapping, tags, the lists, the number)."""
    return BASE.replace("team: ml-platform", "team: " + "[" * lists + "1" + "]" * lists)


def test_load_spec_nesting_at_the_limit_is_read():
    with pytest.raises(SpecError, match=r"tags.team \(limit.yaml:\d+\): input should be a "
                       "valid string"):
        load_spec_text(_nested(MAX_SPEC_DEPTH - 3), "limit.yaml")
    with pytest.raises(SpecError, match=f"nests deeper than {MAX_SPEC_DEPTH} levels"):
        load_spec_text(_nested(MAX_SPEC_DEPTH - 2), "limit.yaml")


def test_load_spec_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    with deadline(5), pytest.raises(SpecError, match=r"is not a regular file \(it is a FIFO"):
        load_spec(fifo)


def test_load_spec_symlink_to_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "spec.yaml"
    link.symlink_to(fifo)
    with deadline(5), pytest.raises(SpecError, match="not a regular file"):
        load_spec(link)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_load_spec_dev_zero_is_refused():
    with deadline(5), pytest.raises(SpecError, match=r"it is a character device"):
        load_spec("/dev/zero")


def test_load_spec_directory_is_refused(tmp_path):
    with pytest.raises(SpecError, match=r"it is a directory"):
        load_spec(tmp_path)


def test_load_spec_file_over_the_limit_is_refused_before_reading(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:  # sparse: its size says it all, nothing needs reading
        f.truncate(MAX_SPEC_BYTES + 1)
    with pytest.raises(SpecError, match=f"is {MAX_SPEC_BYTES + 1:,} bytes; the limit is "
                       f"{MAX_SPEC_BYTES:,}"):
        load_spec(big)


def test_load_spec_nul_byte_in_path_is_a_spec_error():
    with pytest.raises(SpecError, match="cannot read the spec file"):
        load_spec("spec\0.yaml")


def test_load_spec_giant_integer_is_refused_with_a_short_value():
    with pytest.raises(SpecError) as info:
        load_spec_text(BASE.replace("max_count: 2", "max_count: " + "9" * 5000), "big.yaml")
    message = str(info.value)
    assert f"is a number of 5,000 characters; no spec field takes more than " \
           f"{MAX_NUMBER_CHARS}" in message
    assert len(message) < 400


def test_validate_data_giant_integer_prints_its_size_not_its_digits():
    doc = {"api_version": "v1", "name": "x", "region": "us-east-1",
           "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
           "instance": {"type": "ml.g6e.2xlarge", "max_count": 10 ** 5000}}
    with pytest.raises(SpecError, match=r"instance.max_count: input should be less than or "
                       r"equal to 100 \[got <an integer of about 5001 digits>\]"):
        validate_data(doc)


@pytest.mark.parametrize(("line", "message"), [
    ("name: !!bool maybe", r"is not a valid !!bool value; it must be true or false "
                           r"\[got 'maybe'\]"),
    ("name: !!int 0x", r"is not a valid !!int value; it must be a whole number"),
    ("name: !!int 0xZZ", r"is not a valid !!int value"),
    ("name: !!int", r"is not a valid !!int value"),
    ("name: !!int 1.5", r"is not a valid !!int value"),
    ("name: 0x_", r"is not a valid !!int value"),  # PyYAML's int pattern, not its int()
    ("name: !!int 0b_", r"is not a valid !!int value"),
    ("name: !!float abc", r"is not a valid !!float value; it must be a number"),
    ("name: !!null x", r"is not a valid !!null value"),
    ("name: !!binary aGVsbG8=", r"the YAML tag !!binary is not supported"),
    ("name: !!timestamp 2024-01-01", r"the YAML tag !!timestamp is not supported"),
    ("name: !!python/object/apply:os.system [id]", r"the YAML tag "
                                                   r"!!python/object/apply:os.system is not"),
    ("name: !!python/name:os.system", r"the YAML tag !!python/name:os.system is not"),
    ("name: !!set {a, b}", r"the YAML tag !!set is not supported"),
    ("name: !!omap [a: 1]", r"the YAML tag !!omap is not supported"),
    ("name: !!pairs [a: 1]", r"the YAML tag !!pairs is not supported"),
    ("name: !custom x", r"the YAML tag !custom is not supported"),
    ("<<: {a: 1}", r"merge keys \(<<\) are not supported"),
    ("1: x", r"keys must be plain names: YAML reads this key as !!int; quote it"),
    ("? [a]\n: x", r"keys must be plain names: lists and mappings cannot be keys"),
])
def test_load_spec_unsupported_yaml_is_a_clear_error(line, message):
    with pytest.raises(SpecError, match=r"\(tags.yaml:5\): " + message):
        load_spec_text(_with(line), "tags.yaml")


def test_load_spec_explicit_plain_tags_are_read():
    spec = load_spec_text(_with("name: !!str docqa").replace(
        "max_count: 2", "max_count: !!int 2"), "tags.yaml")
    assert (spec.name, spec.instance.max_count) == ("docqa", 2)


def test_load_spec_dates_stay_strings():
    text = BASE.replace("id: Qwen/Qwen2.5-7B-Instruct",
                        "id: Qwen/Qwen2.5-7B-Instruct\n  revision: 2024-01-01")
    assert load_spec_text(text, "date.yaml").model.revision == "2024-01-01"


@pytest.mark.parametrize("revision", ["\\x1e0", "main\\nengine=Python", "v 1", "a=b", ""])
def test_a_revision_that_would_split_its_serving_properties_line_is_refused(revision):
    # written verbatim to ``option.revision=...``: a line break or control character (Python's
    # splitlines breaks at \x1e too) would start a new option, a space or ``=`` would be read
    # into the value; a branch, tag or commit never needs them
    text = BASE.replace("id: Qwen/Qwen2.5-7B-Instruct",
                        f'id: Qwen/Qwen2.5-7B-Instruct\n  revision: "{revision}"')
    with pytest.raises(SpecError, match=r"model\.revision .*must be a branch, tag or commit: "
                                        r"letters, digits and _ \. / - \(no spaces\)"):
        load_spec_text(text, "rev.yaml")


@pytest.mark.parametrize("revision", ["refs/pr/12", "3a1b2c4d5e6f", "v1.0_rc-2", "main"])
def test_branches_tags_commits_and_pr_refs_are_revisions(revision):
    text = BASE.replace("id: Qwen/Qwen2.5-7B-Instruct",
                        f"id: Qwen/Qwen2.5-7B-Instruct\n  revision: {revision}")
    assert load_spec_text(text, "rev.yaml").model.revision == revision


def test_load_spec_exponent_without_a_dot_is_a_number():
    text = BASE.replace("max_model_len: 32768", "max_model_len: 32768\n  "
                        "gpu_memory_utilization: 85e-2")
    assert load_spec_text(text, "exp.yaml").engine.gpu_memory_utilization == 0.85


def test_load_spec_unquoted_off_says_to_quote_it():
    with pytest.raises(SpecError, match=r"kv_cache.mode .*YAML reads an unquoted off as "
                       r"false: write 'off' in quotes \[got False\]"):
        load_spec_text(BASE.replace("mode: cpu", "mode: off"), "off.yaml")


@pytest.mark.parametrize(("old", "new", "path"), [
    ("max_count: 2", 'max_count: "2"', "instance.max_count"),
    ("min_count: 1", "min_count: true", "instance.min_count"),
    ("max_count: 2", "max_count: 2.0", "instance.max_count"),
    ("enable_prefix_caching", "enable_prefix_caching", None),
])
def test_load_spec_values_are_not_coerced(old, new, path):
    if path is None:  # a bool field given a string
        text = BASE.replace("max_model_len: 32768",
                            "max_model_len: 32768\n  enable_prefix_caching: 'yes'")
        path = "engine.enable_prefix_caching"
    else:
        text = BASE.replace(old, new)
    with pytest.raises(SpecError, match=rf"{path} \(coerce.yaml:\d+\): input should be a "
                       "valid"):
        load_spec_text(text, "coerce.yaml")
