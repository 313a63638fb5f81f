"""LoRA adapters under LMCache never share cache keys, checked with LMCache's own key.

Every case runs the model.py files lmikit ships (the base artifact's and each adapter
artifact's, taken out of the packaged tarballs) the way an LMI worker runs them, then hands
the resulting sampling params to LMCache 0.5.6's own ``extract_request_configs_from_
sampling_params`` and ``CacheEngineKey`` (see ``lmi_request_path`` for the path and its
sources). One prompt chunk is one chunk hash, so the key's tags are all that tell two
adapters apart.
"""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lmikit.formatters.isolation import CACHE_TAG_KEY
from lmikit.lora import package_adapter, package_spec_adapter
from lmikit.planner._planner import plan_spec
from lmikit.render._model_artifact import model_artifact_files
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from lmikit.testing import write_lora_adapter
from tests.formatters.conftest import find_decorated
from tests.formatters.lmi_request_path import (
    ADAPTER_HEADER,
    LMCacheKeys,
    LmiWorker,
)

LoadModelPy = Callable[[str], types.ModuleType]
PROMPT = "Summarise the attached contract. " * 20
SHAPES = {
    "prompt": {"prompt": PROMPT, "max_tokens": 8},
    "messages": {"messages": [{"role": "user", "content": PROMPT}]},
    "inputs": {"inputs": PROMPT, "parameters": {"max_new_tokens": 8}},
    "inputs-bare": {"inputs": PROMPT},
}
SPEC = """
api_version: v1
name: docqa
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
kv_cache:
  mode: "{mode}"
workload:
  reused_context_tokens: 460000
adapters:
  - name: legal
    source: adapters/legal
  - name: medical
    source: adapters/medical
"""


pytestmark = pytest.mark.usefixtures("fresh_worker")  # each test is a new LMI worker


def _adapter(root: Path, name: str, fill: int | None = None) -> Path:
    return write_lora_adapter(root / "adapters" / name,
                              fill=sum(name.encode()) % 256 if fill is None else fill)


def _write(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source))
    return path


def _spec(root: Path, mode: str = "cpu", extra: str = "") -> DeploymentSpec:
    for name in ("legal", "medical"):
        if not (root / "adapters" / name).is_dir():
            _adapter(root, name)
    return load_spec_text(SPEC.format(mode=mode) + extra, source=str(root / "spec.yaml"))


def _model_py(tarball: bytes) -> str | None:
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        if "model.py" not in tar.getnames():
            return None
        member = tar.extractfile("model.py")
        assert member is not None
        return member.read().decode()


def _worker(spec: DeploymentSpec, root: Path, load_model_py: LoadModelPy) -> LmiWorker:
    """A worker with the base and adapter model.py files ``lmikit deploy`` would ship
    (loaded in LMI's order: the base at start-up, then each adapter as it registers)."""
    plan = plan_spec(spec, root)
    base_text = model_artifact_files(spec, plan, root).get("model.py")
    base = load_model_py(base_text.decode()) if base_text else None
    adapters: dict[str, types.ModuleType | None] = {}
    for a in spec.adapters:
        text = _model_py(package_spec_adapter(spec, plan, a, root).data)
        adapters[a.name] = load_model_py(text) if text else None
    return LmiWorker(base, adapters)


def _to(adapter: str) -> dict[str, str]:
    return {ADAPTER_HEADER: adapter}


@pytest.fixture
def worker(tmp_path: Path, load_model_py: LoadModelPy) -> LmiWorker:
    return _worker(_spec(tmp_path), tmp_path, load_model_py)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_isolation_two_adapters_never_share_a_key(worker: LmiWorker, lmcache: LMCacheKeys,
                                                  shape: str) -> None:
    payload = SHAPES[shape]
    legal = lmcache.key(worker.serve(payload, _to("legal")))
    medical = lmcache.key(worker.serve(payload, _to("medical")))
    base = lmcache.key(worker.serve(payload))
    assert legal != medical and legal != base and medical != base
    assert len({legal.to_string(), medical.to_string(), base.to_string()}) == 3
    assert lmcache.key(worker.serve(payload, _to("legal"))) == legal  # reuse within one
    (name, value), = legal.tags
    assert name == "lmikit_adapter" and value.startswith("legal.")
    assert base.tags is None


def test_isolation_without_lmikit_model_py_the_adapters_collide(lmcache: LMCacheKeys) -> None:
    """The problem itself: LMCache's key does not tell two LoRA adapters apart."""
    bare = LmiWorker(None, {"legal": None, "medical": None})
    payload = SHAPES["messages"]
    legal = bare.serve(payload, _to("legal"))
    assert legal.lora == "legal"
    assert lmcache.key(legal) == lmcache.key(bare.serve(payload, _to("medical"))) \
        == lmcache.key(bare.serve(payload))


def test_isolation_two_versions_of_one_adapter_differ(tmp_path: Path, lmcache: LMCacheKeys,
                                                      load_model_py: LoadModelPy) -> None:
    one = _adapter(tmp_path / "v1", "legal", 1)
    two = _adapter(tmp_path / "v2", "legal", 2)
    keys = []
    for path in (one, two):
        package = package_adapter(path, cache_tag_name="legal")
        text = _model_py(package.data)
        assert text is not None and package.cache_tag is not None
        worker = LmiWorker(None, {"legal": load_model_py(text)})
        keys.append(lmcache.key(worker.serve(SHAPES["prompt"], _to("legal"))))
    assert keys[0] != keys[1]


def test_isolation_tag_ignores_the_formatter_but_not_the_config(tmp_path: Path) -> None:
    path = _adapter(tmp_path, "legal")
    fmt = _write(tmp_path / "fmt.py", """
        from lmikit.formatters import output_formatter

        @output_formatter
        def same(output):
            return output
        """)
    plain = package_adapter(path, cache_tag_name="legal").cache_tag
    assert package_adapter(path, formatter=fmt, cache_tag_name="legal").cache_tag == plain
    config = json.loads((path / "adapter_config.json").read_text())
    (path / "adapter_config.json").write_text(json.dumps({**config, "lora_alpha": 32}))
    assert package_adapter(path, cache_tag_name="legal").cache_tag != plain
    assert package_adapter(path, cache_tag_name="other").cache_tag != plain


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_isolation_client_cache_entries_on_an_adapter_are_replaced(
        worker: LmiWorker, lmcache: LMCacheKeys, shape: str) -> None:
    medical_tag = lmcache.key(worker.serve(SHAPES["prompt"], _to("medical"))).tags[0][1]
    forged = {CACHE_TAG_KEY: medical_tag, "lmcache.tag.tenant": "t1",
              "lmcache.skip_save": True, "transport_hint": "kept"}
    payload = json.loads(json.dumps(SHAPES[shape]))
    payload["kv_transfer_params"] = dict(forged)
    payload["vllm_xargs"] = {"kv_transfer_params": "x", "other": 1}
    payload.setdefault("parameters", {})["kv_transfer_params"] = dict(forged)
    served = worker.serve(payload, _to("legal"))
    clean = worker.serve(SHAPES[shape], _to("legal"))
    assert lmcache.key(served) == lmcache.key(clean)
    configs = lmcache.extract(served.sampling_params)
    assert configs == lmcache.extract(clean.sampling_params)
    assert list(configs) == [CACHE_TAG_KEY] and configs[CACHE_TAG_KEY].startswith("legal.")
    assert served.sampling_params.extra_args["kv_transfer_params"]["transport_hint"] == "kept"
    assert served.lora == "legal"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_isolation_base_never_carries_an_adapter_tag(worker: LmiWorker, lmcache: LMCacheKeys,
                                                     shape: str) -> None:
    legal_tag = lmcache.key(worker.serve(SHAPES["prompt"], _to("legal"))).tags[0][1]
    payload = json.loads(json.dumps(SHAPES[shape]))
    payload["kv_transfer_params"] = {CACHE_TAG_KEY: legal_tag}
    payload.setdefault("parameters", {})["kv_transfer_params"] = {CACHE_TAG_KEY: legal_tag}
    served = worker.serve(payload)
    assert lmcache.extract(served.sampling_params) is None
    assert lmcache.key(served) == lmcache.key(worker.serve(SHAPES[shape]))
    assert lmcache.key(served).tags is None and served.lora is None


def test_isolation_base_cannot_run_an_adapter_by_model_name(worker: LmiWorker,
                                                            lmcache: LMCacheKeys) -> None:
    by_model = worker.serve({**SHAPES["prompt"], "model": "legal"})
    by_parameter = worker.serve({"inputs": PROMPT, "parameters": {"model": "legal"}})
    assert by_model.lora is None and by_parameter.lora is None
    assert lmcache.key(by_model).tags is None


def test_isolation_adapter_cannot_run_another_adapter(worker: LmiWorker,
                                                      lmcache: LMCacheKeys) -> None:
    served = worker.serve({"inputs": PROMPT, "parameters": {"model": "medical"}},
                          _to("legal"))
    assert served.lora == "legal"
    assert lmcache.key(served).tags[0][1].startswith("legal.")


def test_isolation_adapter_named_in_the_payload_gets_its_tag(worker: LmiWorker,
                                                             lmcache: LMCacheKeys) -> None:
    served = worker.serve({**SHAPES["prompt"], "adapters": "legal"})
    assert served.lora == "legal"
    assert lmcache.key(served) == lmcache.key(worker.serve(SHAPES["prompt"], _to("legal")))


@pytest.mark.parametrize("where", ["top", "parameters"])
def test_isolation_beam_search_on_an_adapter_is_refused(worker: LmiWorker, where: str) -> None:
    payload: dict[str, Any] = {"inputs": PROMPT, "parameters": {}}
    (payload if where == "top" else payload["parameters"])["use_beam_search"] = True
    module = worker.adapters["legal"]
    assert module is not None
    with pytest.raises(module.FormatterError, match="beam search drops the adapter's cache tag"):
        worker.serve(payload, _to("legal"))
    assert worker.serve({**SHAPES["prompt"], "use_beam_search": True}).lora is None


def test_isolation_runs_the_adapters_formatter_first(tmp_path: Path, lmcache: LMCacheKeys,
                                                     load_model_py: LoadModelPy) -> None:
    _write(tmp_path / "legal_fmt.py", """
        from lmikit.formatters import input_formatter

        @input_formatter
        def legal_request(request):
            request = dict(request, prompt="LEGAL: " + request["prompt"])
            request["kv_transfer_params"] = {"lmcache.tag.lmikit_adapter": "medical.x"}
            return request
        """)
    spec = _spec(tmp_path, extra="")
    spec = spec.model_copy(update={"adapters": [
        spec.adapters[0].model_copy(update={"formatter": "legal_fmt.py"}), spec.adapters[1]]})
    worker = _worker(spec, tmp_path, load_model_py)
    module = worker.adapters["legal"]
    assert module is not None
    seen = find_decorated(module, "is_input_formatter")(dict(SHAPES["prompt"]))
    assert seen["prompt"].startswith("LEGAL: ")
    key = lmcache.key(worker.serve(SHAPES["prompt"], _to("legal")))
    assert key.tags[0][1].startswith("legal.") and key.tags[0][1] != "medical.x"


def test_isolation_adapter_without_input_formatter_keeps_the_base_formatter(
        tmp_path: Path, lmcache: LMCacheKeys, load_model_py: LoadModelPy) -> None:
    """LMI applies the base's input formatter to an adapter without one; the adapter's
    isolating model.py keeps doing that (before its tag)."""
    _write(tmp_path / "base_fmt.py", """
        from lmikit.formatters import input_formatter

        @input_formatter
        def base_request(request):
            return dict(request, prompt="BASE: " + request["prompt"])
        """)
    spec = _spec(tmp_path, extra="formatters:\n  input: base_fmt.py\n")
    worker = _worker(spec, tmp_path, load_model_py)
    adapter_fn = find_decorated(worker.adapters["legal"], "is_input_formatter")
    out = adapter_fn(dict(SHAPES["prompt"]), tokenizer=None)
    assert out["prompt"].startswith("BASE: ")
    assert out["kv_transfer_params"][CACHE_TAG_KEY].startswith("legal.")
    base_out = find_decorated(worker.base, "is_input_formatter")(dict(SHAPES["prompt"]))
    assert base_out["prompt"].startswith("BASE: ") and "kv_transfer_params" not in base_out


def test_isolation_lmi_finds_only_the_isolating_input_formatter(
        tmp_path: Path, load_model_py: LoadModelPy) -> None:
    _write(tmp_path / "base_fmt.py", """
        from lmikit.formatters import input_formatter

        @input_formatter
        def aaa_first_in_dir_order(request):
            return request
        """)
    spec = _spec(tmp_path, extra="formatters:\n  input: base_fmt.py\n")
    worker = _worker(spec, tmp_path, load_model_py)
    for module in (worker.base, worker.adapters["legal"]):
        assert module is not None
        marked = [n for n in dir(module)
                  if getattr(getattr(module, n), "is_input_formatter", False)]
        assert marked == ["lmikit_isolated_input"]


def test_isolation_is_off_without_lmcache(tmp_path: Path) -> None:
    spec = _spec(tmp_path, mode="off")
    plan = plan_spec(spec, tmp_path)
    assert "model.py" not in model_artifact_files(spec, plan, tmp_path)
    package = package_spec_adapter(spec, plan, spec.adapters[0], tmp_path)
    assert package.cache_tag is None and "model.py" not in package.files
