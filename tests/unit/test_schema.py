from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from lmikit.errors import SpecError
from lmikit.spec._schema import SCHEMA_FILE, spec_json_schema, validate_file
from tests.conftest import DEFAULT_SPEC, EXAMPLE_SPECS


def test_committed_schema_is_in_sync():
    committed = json.loads(SCHEMA_FILE.read_text())
    assert committed == spec_json_schema(), (
        "sdk/lmikit/spec/deployment-spec.schema.json is stale; regenerate it with "
        "`lmikit schema > sdk/lmikit/spec/deployment-spec.schema.json`")


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_examples_pass_the_committed_schema(path):
    jsonschema.validate(yaml.safe_load(path.read_text()),
                        json.loads(SCHEMA_FILE.read_text()))


def test_schema_rejects_what_the_model_rejects(tmp_path):
    doc = yaml.safe_load(DEFAULT_SPEC.read_text())
    doc["kv_cache"]["mode"] = "disk"
    doc["instance"]["copies_per_instance"] = 0
    schema_paths = {".".join(map(str, e.absolute_path)) for e in
                    jsonschema.Draft202012Validator(spec_json_schema()).iter_errors(doc)}
    assert schema_paths == {"kv_cache.mode", "instance.copies_per_instance"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError) as info:
        validate_file(bad)
    paths = [p.path for p in info.value.problems]
    assert sorted(paths) == ["instance.copies_per_instance", "kv_cache.mode"]  # each once


def test_validate_file_keeps_schema_messages_the_model_lacks(tmp_path):
    doc = yaml.safe_load(DEFAULT_SPEC.read_text())
    doc["kv_cache"]["cpu_size_gb"] = None  # the model reads null as 'auto'; the schema not
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"kv_cache.cpu_size_gb \(.*bad.yaml:\d+\): schema: "
                       "None is not valid"):
        validate_file(bad)


def test_spec_reference_doc_is_in_sync():
    from lmikit.spec._schema import spec_reference_markdown
    from tests.conftest import ROOT

    assert (ROOT / "docs" / "spec.md").read_text() == spec_reference_markdown(), (
        "docs/spec.md is stale; regenerate it as its first lines say")
