"""Fuzz the CLI with mutated examples: no tracebacks, no hangs, validate and render agree.

Every example in examples/ is mutated at the YAML level (text cut, spliced, lines moved or
repeated, hostile snippets: aliases, tags, deep brackets, huge numbers) and at the value level
(one field, or one key of the example's model config.json, set to a hostile value). For each
mutated input, `lmikit validate` and `lmikit render -t X` for every target must

- end with exit 0 or a one-line ``Kind: message`` from the project's error tree (any other
  exception propagates out of the runner and fails the test with its traceback);
- each finish within PER_INPUT_SECONDS (a SIGALRM deadline fails the test on a hang);
- agree: validate accepts exactly when every target renders; when validate refuses for a
  spec, plan or catalog reason every render refuses with the same message, and when it
  refuses for a render reason the refusing renders are the targets it names;
- print each problem once.

Runs under the "ci" hypothesis profile (tests/conftest.py).
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmikit.accept._accept import TARGETS
from lmikit.cli import main
from tests.conftest import EXAMPLE_SPECS, EXAMPLES, deadline

PER_INPUT_SECONDS = 5
KINDS = ("SpecError: ", "CatalogError: ", "PlanError: ", "RenderError: ")
EXAMPLE_TEXT = {p.name: p.read_text() for p in EXAMPLE_SPECS}
EXAMPLE_DOCS = {name: yaml.safe_load(text) for name, text in EXAMPLE_TEXT.items()}
CONFIG_NAME = "models/llama-3.1-8b-config.json"
CONFIG = json.loads((EXAMPLES / CONFIG_NAME).read_text())
SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
pytestmark = pytest.mark.slow  # the CLI on hundreds of mutated examples

# YAML text that a hostile or careless file might hold
SNIPPETS = [
    "", ":", " - ", "\t", "{", "[", "]", "}", "&a", "*a", "*nope", "&a [*a]", "? ", "<<: *a",
    "!!python/object/apply:os.system [id]", "!!bool maybe", "!!int 0x", "!!int ''",
    "!!float x", "!!binary aGk=", "!!set {a}", "!!timestamp 2024-99-99", "!custom x",
    "%YAML 1.1\n---\n", "---\n", "...\n", "\ufeff", "'", '"', "|", ">", "#", "@", "`", "\\",
    "9" * 5000, "0x" + "f" * 5000, "[" * 2000, "{a: " * 2000, "1e999", ".nan", "-.inf",
    "off", "yes", "~", "null", "2024-01-01", "1:2:3:4:5:6:7:8:9", "x" * 300,
]
# Hostile values for one field (raw YAML text, placed where the field's value was)
VALUES = SNIPPETS[9:] + [
    "-1", "0", "1", "2", "4096", "1.5", "-0.0", "true", "false", "''", "'2'", "[]", "{}",
    "[[[[1]]]]", "{a: 1}", "auto", "cpu+disk", "remote", "ml.p4de.24xlarge", "ml.g6.xlarge",
    "s3://bucket/prefix", "lm://cache:65432", "redis://cache:6379", "/tmp/lmcache/",
    "Qwen/Qwen2.5-72B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "0.1.0", "99.0.0",
    "99999999999", "1e3", "9e-1", "&a [*a, *a]", "required", "prefix_aware", "kv_aware",
]
# Hostile JSON values for one config.json key
JSON_VALUES = ["9" * 5000, "-1", "0", "1", "3", "5", "4096", "1e308", "1.5", "true", "null",
               '"4096"', '"bfloat16"', '"fp8"', '"x"', "[]", "{}", "[" * 200 + "]" * 200,
               '["sliding_attention", "full_attention"]', "2147483648", "65536"]
CONFIG_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads",
               "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
               "intermediate_size", "torch_dtype", "tie_word_embeddings", "kv_lora_rank",
               "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
               "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
               "moe_intermediate_size", "first_k_dense_replace", "sliding_window",
               "use_sliding_window", "max_window_layers", "layer_types",
               "sliding_window_pattern", "quantization_config", "text_config",
               "vision_config"]


def _run(*args: str) -> tuple[int, str]:
    with deadline(PER_INPUT_SECONDS):
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code:
        assert result.output.startswith(KINDS), result.output[:500]
    return result.exit_code, result.output


def check_agreement(spec_text: str, config_text: str | None = None) -> None:
    folder = Path(tempfile.mkdtemp(prefix="lmikit-fuzz-"))
    try:
        (folder / "models").mkdir()
        (folder / CONFIG_NAME).write_text(config_text if config_text is not None
                                          else json.dumps(CONFIG))
        spec = folder / "spec.yaml"
        spec.write_text(spec_text)
        code, out = _run("validate", str(spec))
        problem_lines = [line for line in out.splitlines() if line.startswith("  - ")]
        assert len(problem_lines) == len(set(problem_lines)), out
        renders = {t: _run("render", str(spec), "-t", t) for t in TARGETS}
        refusing = {t for t, (c, _) in renders.items() if c}
        if code == 0:
            assert not refusing, {t: renders[t][1][:300] for t in refusing}
        elif not out.startswith("RenderError: "):
            assert refusing == set(TARGETS)
            assert all(o == out for _, o in renders.values()), out
        else:
            named = {t for line in problem_lines
                     for t in line[4:].split(": ", 1)[0].split(", ")}
            assert refusing == named, (out, refusing)
    finally:
        shutil.rmtree(folder)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@SETTINGS
@given(st.sampled_from(sorted(EXAMPLE_TEXT)), st.randoms(use_true_random=False),
       st.sampled_from(["cut", "splice", "value", "value", "repeat", "drop", "swap", "indent",
                        "text"]),
       st.sampled_from(SNIPPETS), st.text(max_size=20))
def test_accept_fuzz_yaml_mutations(name, rnd: random.Random, how, snippet, text):
    source = EXAMPLE_TEXT[name]
    lines = _lines(source)
    i, j = rnd.randrange(len(lines)), rnd.randrange(len(lines))
    if how == "cut":
        mutated = source[:rnd.randrange(len(source) + 1)]
    elif how == "splice":
        at = rnd.randrange(len(source) + 1)
        mutated = source[:at] + snippet + source[at:]
    elif how == "value":  # the value after the first ": " of a line
        head, sep, _ = lines[i].partition(": ")
        lines[i] = head + (sep or ": ") + snippet + "\n"
        mutated = "".join(lines)
    elif how == "repeat":
        mutated = "".join(lines[:i + 1] + lines[i:])
    elif how == "drop":
        mutated = "".join(lines[:i] + lines[i + 1:])
    elif how == "swap":
        lines[i], lines[j] = lines[j], lines[i]
        mutated = "".join(lines)
    elif how == "indent":
        lines[i] = "  " + lines[i] if rnd.random() < 0.5 else lines[i].lstrip()
        mutated = "".join(lines)
    else:
        at = rnd.randrange(len(source) + 1)
        mutated = source[:at] + text + source[at:]
    check_agreement(mutated)


def _paths(node, prefix=()):
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


MARK = "lmikit-fuzz-value"


@SETTINGS
@given(st.sampled_from(sorted(EXAMPLE_DOCS)), st.data())
def test_accept_fuzz_value_mutations(name, data):
    doc = json.loads(json.dumps(EXAMPLE_DOCS[name]))
    path = data.draw(st.sampled_from(list(_paths(doc))))
    how = data.draw(st.sampled_from(["set", "set", "delete", "add"]))
    node = doc
    for part in path[:-1]:
        node = node[part]
    if how == "delete":
        del node[path[-1]]
        check_agreement(yaml.safe_dump(doc, sort_keys=False))
        return
    value = data.draw(st.one_of(st.sampled_from(VALUES), st.integers(-(2 ** 70), 2 ** 70).map(
        str), st.floats(allow_nan=False, allow_infinity=False).map(repr)))
    if how == "add" and isinstance(node, dict):
        node[data.draw(st.sampled_from(["extra", "mode", "size", "enabled", "rank"]))] = MARK
    else:
        node[path[-1]] = MARK
    text = yaml.safe_dump(doc, sort_keys=False)
    check_agreement(text.replace(MARK, value.replace("\n", " ") if "\n" not in value else
                                 json.dumps(value), 1))


@SETTINGS
@given(st.sampled_from(CONFIG_KEYS), st.sampled_from(JSON_VALUES),
       st.sampled_from(["set", "delete"]))
def test_accept_fuzz_config_json_mutations(key, value, how):
    """The example that reads a config.json, with one key of that file made hostile."""
    config = dict(CONFIG)
    if how == "delete":
        config.pop(key, None)
        text = json.dumps(config)
    else:
        config[key] = MARK
        text = json.dumps(config).replace(f'"{MARK}"', value)
    spec_name = next(n for n, d in EXAMPLE_DOCS.items() if d["model"].get("config_path"))
    check_agreement(EXAMPLE_TEXT[spec_name], text)
