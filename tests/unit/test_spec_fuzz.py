"""Property-based tests: whatever YAML arrives, the loader answers with a spec or a SpecError.

Run deeper with ``HYPOTHESIS_PROFILE=deep pytest tests/unit/test_spec_fuzz.py``.
"""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmikit.errors import SpecError
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from tests.conftest import EXAMPLE_SPECS

EXAMPLES = [yaml.safe_load(p.read_text()) for p in EXAMPLE_SPECS]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["auto", "cpu", "cpu+disk", "remote", "off", "v1", "ml.p4de.24xlarge",
                     "s3://b/k", "Qwen/Qwen2.5-7B-Instruct", "prefix_aware"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=12), children, max_size=4)),
    max_leaves=12,
)


def _check(text: str) -> None:
    try:
        result = load_spec_text(text, source="fuzz.yaml")
    except SpecError as exc:
        assert exc.problems, "a SpecError must carry at least one problem"
        assert str(exc).startswith(f"{len(exc.problems)} problem(s) in fuzz.yaml")
    else:
        assert isinstance(result, DeploymentSpec)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_loader_random_text_gives_spec_error(text):
    _check(text)


@given(values)
def test_loader_random_documents_give_spec_error(doc):
    _check(yaml.safe_dump(doc))


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for part in path[:-1]:
        node = node[part]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


_DELETE = object()


@given(st.sampled_from(range(len(EXAMPLES))), st.data())
def test_loader_mutated_examples_give_spec_error(index, data):
    import copy

    doc = copy.deepcopy(EXAMPLES[index])
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(st.one_of(values, st.just(_DELETE)))
    doc = _set(doc, path, value)
    _check(yaml.safe_dump(doc))


@given(st.sampled_from(EXAMPLE_SPECS), st.data())
def test_loader_truncated_or_spliced_text_gives_spec_error(path, data):
    text = path.read_text()
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.sampled_from(["", ":", " - ", "\t", "{", "&a", "*a", "!!python/object:x",
                                      "\n  bad: [", "<<: *x"]))
    _check(text[:cut] + junk + text[cut:])
