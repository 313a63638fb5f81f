"""HyperPod's vLLM worker can run the model: each first-vLLM row is checked against vLLM's
own source (tests/data/hyperpod/vllm-model-support.txt, written from the PyPI sdists by
extract_vllm_model_support.py), and each rule of lmikit.render._hyperpod_images against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmikit.catalog._model_options import option_rows
from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._hyperpod import hyperpod_manifest, hyperpod_notes
from lmikit.render._hyperpod_images import (
    FIRST_VLLM,
    MISTRAL_LARGE_3,
    WORKER_IMAGES,
    choice_note,
    choose_worker_image,
    image_vllm_version,
    model_needs,
    unknown_architectures,
    version_tuple,
)
from lmikit.render._hyperpod_vllm import DEFAULT_VLLM_IMAGE, VLLM_VERSION
from lmikit.spec._loader import load_spec, load_spec_text
from tests.conftest import ROOT, hyperpod_crd_v1
from tests.unit.test_render_hyperpod_vllm import _flags, _vllm_worker_text

DATA = ROOT / "tests" / "data" / "hyperpod"
CATALOG = sorted((ROOT / "sdk" / "lmikit" / "catalog" / "models").glob("*.json"))
LMI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"
MODEL_EXAMPLES = sorted((ROOT / "examples" / "models").glob("*.yaml"))


def _support() -> tuple[list[str], dict[str, set[str]]]:
    checked: list[str] = []
    found: dict[str, set[str]] = {}
    for line in (DATA / "vllm-model-support.txt").read_text().splitlines():
        if line.startswith("#"):
            continue
        version, probe = line.split("\t")
        if version == "checked":
            checked = probe.split(",")
        else:
            found.setdefault(probe, set()).add(version)
    return checked, found


CHECKED, FOUND = _support()


def _catalog_model(path: Path) -> tuple[str, list[str], list[tuple[str, str]]]:
    entry = json.loads(path.read_text())
    model_id = entry["model_id"]
    options = [("--" + r.option.replace("_", "-"), r.value) for r in option_rows(model_id, 8)]
    return model_id, entry.get("config", {}).get("architectures", []), options


@pytest.mark.parametrize("row", FIRST_VLLM, ids=lambda r: r.need)
def test_first_vllm_row_is_the_first_checked_release_with_it(row):
    """The rule each row states: vLLM ``row.version`` has it, every later release checked has
    it, and the release checked just before does not (the oldest checked is a bound)."""
    assert row.version in CHECKED, f"{row.version} is not a release the data file checked"
    have = FOUND.get(row.probe, set())
    at = CHECKED.index(row.version)
    assert set(CHECKED[at:]) <= have, (row.probe, sorted(set(CHECKED[at:]) - have))
    if at > 0:
        assert CHECKED[at - 1] not in have, f"{row.probe} is already in {CHECKED[at - 1]}"
        assert "not in" in row.source or "not 0." in row.source
    else:
        assert "oldest release checked" in row.source


def test_every_catalog_model_has_a_first_vllm_release():
    for path in CATALOG:
        model_id, architectures, options = _catalog_model(path)
        assert model_needs(model_id, architectures, options), model_id
        assert unknown_architectures(model_id, architectures) == [], model_id


@pytest.mark.parametrize("path", CATALOG, ids=lambda p: p.stem)
def test_chosen_worker_image_serves_every_catalog_model(path):
    """With no image asked for, the worker's vLLM is at least what the model needs."""
    model_id, architectures, options = _catalog_model(path)
    need = max(version_tuple(r.version) for r in model_needs(model_id, architectures, options))
    choice = choose_worker_image(model_id, architectures, options)
    assert choice.vllm_version is not None
    assert version_tuple(choice.vllm_version) >= need
    assert choice.picked == (choice.image != DEFAULT_VLLM_IMAGE)
    if choice.picked:  # the default would not do: the oldest known image that does
        assert version_tuple(VLLM_VERSION) < need
        older = [w for w in WORKER_IMAGES if version_tuple(w.vllm_version) <
                 version_tuple(choice.vllm_version)]
        assert all(version_tuple(w.vllm_version) < need for w in older)


@pytest.mark.parametrize("path", CATALOG, ids=lambda p: p.stem)
@pytest.mark.parametrize("known", WORKER_IMAGES, ids=lambda w: w.vllm_version)
def test_a_known_image_older_than_the_model_needs_is_refused(path, known):
    model_id, architectures, options = _catalog_model(path)
    need = max(model_needs(model_id, architectures, options),
               key=lambda r: version_tuple(r.version))
    if version_tuple(known.vllm_version) >= version_tuple(need.version):
        assert choose_worker_image(model_id, architectures, options, known.image).image \
            == known.image
        return
    with pytest.raises(RenderError, match=rf"runs vLLM {known.vllm_version}, but .* needs vLLM "
                                          rf">= {need.version}"):
        choose_worker_image(model_id, architectures, options, known.image)


def test_mistral_large_3_gets_a_vllm_that_has_its_architecture_and_ministral_3_the_default():
    """vLLM 0.11.x maps Mistral Large 3's params.json to MixtralForCausalLM (the wrong model);
    Ministral 3's architecture and its Llama 4 attention scaling are in 0.11.1."""
    large = choose_worker_image(MISTRAL_LARGE_3, (), ())
    assert large.picked and version_tuple(large.vllm_version) >= (0, 12, 0)
    assert large.vllm_version in FOUND["architecture MistralLarge3ForCausalLM"]
    assert VLLM_VERSION not in FOUND["architecture MistralLarge3ForCausalLM"]
    small = choose_worker_image("mistralai/Ministral-3-8B-Instruct-2512",
                                ("Mistral3ForConditionalGeneration",), ())
    assert small.image == DEFAULT_VLLM_IMAGE and VLLM_VERSION in FOUND["llama_4_scaling"]


def test_tags_that_name_the_vllm_release_are_read_and_others_are_not():
    assert image_vllm_version("vllm/vllm-openai:v0.11.0") == "0.11.0"
    assert image_vllm_version("docker.io/vllm/vllm-openai:v0.23.0") == "0.23.0"
    assert image_vllm_version("public.ecr.aws/deep-learning-containers/vllm:"
                              "0.13.0-gpu-py312-cu129-ubuntu22.04-ec2") == "0.13.0"
    for image in ("lmcache/vllm-openai:v0.3.7", "my.registry/vllm:prod-1",
                  "vllm/vllm-openai:v0.11.0-rc1"):
        assert image_vllm_version(image) is None, image


def test_known_images_name_their_vllm_and_have_a_flag_list():
    assert WORKER_IMAGES[0].image == DEFAULT_VLLM_IMAGE
    assert WORKER_IMAGES[0].vllm_version == VLLM_VERSION
    for known in WORKER_IMAGES:
        assert f":{known.vllm_version}-" in known.image and ":latest" not in known.image
        assert (DATA / f"vllm-{known.vllm_version}-flags.txt").is_file()
        assert "cu129" in known.image  # the default's CUDA: the same node driver
        assert len(known.source) > 40
    versions = [version_tuple(w.vllm_version) for w in WORKER_IMAGES]
    assert versions == sorted(versions)


@pytest.mark.parametrize("path", MODEL_EXAMPLES, ids=lambda p: p.name)
def test_model_examples_render_a_worker_whose_vllm_takes_every_flag(path):
    """The image lmikit picks parses every argument rendered for it (its own flag list)."""
    spec = load_spec_text(_vllm_worker_text(path))
    plan = plan_spec(spec, base_dir=path.parent)
    worker = hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE)["spec"]["worker"]
    version = image_vllm_version(worker["image"])
    assert version is not None
    flags = _flags(version)
    args = worker["args"]
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        positive = "--" + arg[len("--no-"):] if arg.startswith("--no-") else arg
        assert positive in flags, f"{arg} is not a vLLM {version} option"
        if flags[positive] is not None:
            assert args[i + 1] in flags[positive], (arg, args[i + 1], version)


def test_mistral_large_3_manifest_runs_the_newer_image_and_fits_the_crd():
    import jsonschema
    crd_validator = jsonschema.Draft7Validator(hyperpod_crd_v1())
    example = ROOT / "examples" / "models" / "mistral-large-3-p5e.yaml"
    spec = load_spec(example)
    plan = plan_spec(spec, base_dir=example.parent)
    manifest = hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE)
    assert list(crd_validator.iter_errors(manifest)) == []
    assert manifest["spec"]["worker"]["image"] == WORKER_IMAGES[1].image
    notes = hyperpod_notes(spec, plan)
    assert any("needs vLLM >= 0.12.0" in n and WORKER_IMAGES[1].image in n for n in notes)
    with pytest.raises(RenderError, match="runs vLLM 0.11.1, but .* needs vLLM >= 0.12.0"):
        hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE, vllm_image=DEFAULT_VLLM_IMAGE)
    with pytest.raises(RenderError, match="runs vLLM 0.11.0"):
        hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE, vllm_image="vllm/vllm-openai:v0.11.0")


def test_an_image_lmikit_cannot_read_is_kept_with_a_note():
    example = ROOT / "examples" / "models" / "mistral-large-3-p5e.yaml"
    spec = load_spec(example)
    plan = plan_spec(spec, base_dir=example.parent)
    image = "lmcache/vllm-openai:v0.3.7"  # the operator's samples' image: LMCache's version
    manifest = hyperpod_manifest(spec, plan, image_uri=LMI_IMAGE, vllm_image=image)
    assert manifest["spec"]["worker"]["image"] == image
    notes = hyperpod_notes(spec, plan, image)
    assert any(n.startswith(f"lmikit cannot check vllm_image {image!r}") and
               "needs vLLM >= 0.12.0" in n for n in notes)


def test_a_model_outside_the_table_gets_a_note_not_a_pick():
    choice = choose_worker_image("acme/new-model", ("AcmeForCausalLM",), ())
    assert choice.image == DEFAULT_VLLM_IMAGE and not choice.picked and choice.needed is None
    note = choice_note("acme/new-model", ("AcmeForCausalLM",), choice)
    assert note is not None and "AcmeForCausalLM" in note and "cannot check" in note
    assert unknown_architectures("acme/new-model", ()) == ["?"]
    assert choice_note("Qwen/Qwen3-8B", ("Qwen3ForCausalLM",),
                       choose_worker_image("Qwen/Qwen3-8B", ("Qwen3ForCausalLM",), ())) is None
