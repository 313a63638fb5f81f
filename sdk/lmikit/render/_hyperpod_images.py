"""Which vLLM worker image can run the model, for HyperPod's KV cache and routing.

The operator's cache and routing run a vLLM worker image (:mod:`lmikit.render`),
so that image's vLLM must know the model's architecture and accept its options. Two tables,
one row per fact with its source; tests check them against vLLM's own source
(tests/data/hyperpod/vllm-model-support.txt):

``FIRST_VLLM``
    what a catalog model needs (its architecture, or an option value) -> the first vLLM
    release that has it.
``WORKER_IMAGES``
    the worker images lmikit knows, each with the vLLM it runs.

:func:`choose_worker_image`: with no image asked for, the default if its vLLM serves the model,
else the oldest known image that does; an image asked for whose vLLM is known and too old is
refused; one whose vLLM lmikit cannot tell is kept, with a note saying so.

>>> choose_worker_image("Qwen/Qwen2.5-7B-Instruct", ("Qwen2ForCausalLM",), ()).vllm_version
'0.11.1'
>>> choose_worker_image(MISTRAL_LARGE_3, (), ()).vllm_version
'0.19.1'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from lmikit.errors import RenderError
from lmikit.render._hyperpod_vllm import DEFAULT_VLLM_IMAGE, VLLM_VERSION

_SDISTS = "vllm-<version>.tar.gz from PyPI"
_REGISTRY = "vllm/model_executor/models/registry.py"
DLC = "public.ecr.aws/deep-learning-containers/vllm"
_DLC_DATA = "github.com/aws/deep-learning-containers docs/src/data/vllm/"
MISTRAL_LARGE_3 = "mistralai/Mistral-Large-3-675B-Instruct-2512"


@dataclass(frozen=True)
class FirstVllm:
    """``need`` works from vLLM ``version`` on. ``probe`` names what
    tests/data/hyperpod/vllm-model-support.txt records for it in each vLLM source checked."""

    need: str
    version: str
    probe: str
    source: str


FIRST_VLLM: tuple[FirstVllm, ...] = (
    FirstVllm("architecture Qwen2ForCausalLM", "0.8.3", "architecture Qwen2ForCausalLM",
              f"{_REGISTRY} of 0.8.3, the oldest release checked ({_SDISTS})"),
    FirstVllm("architecture LlamaForCausalLM", "0.8.3", "architecture LlamaForCausalLM",
              f"{_REGISTRY} of 0.8.3, the oldest release checked ({_SDISTS})"),
    FirstVllm("architecture Qwen3ForCausalLM", "0.8.4", "architecture Qwen3ForCausalLM",
              f"{_REGISTRY}: in 0.8.4, not in 0.8.3 ({_SDISTS})"),
    FirstVllm("architecture Qwen3VLForConditionalGeneration", "0.11.0",
              "architecture Qwen3VLForConditionalGeneration",
              f"{_REGISTRY}: in 0.11.0, not in 0.10.2 ({_SDISTS})"),
    FirstVllm("architecture DeepseekV32ForCausalLM", "0.11.0",
              "architecture DeepseekV32ForCausalLM",
              f"{_REGISTRY}: in 0.11.0, not in 0.10.2 ({_SDISTS})"),
    FirstVllm("architecture Mistral3ForConditionalGeneration (Ministral 3, with Llama 4 "
              "attention scaling)", "0.11.1", "llama_4_scaling",
              "vllm/model_executor/models/llama.py (mistral.py from 0.19) reads "
              f"llama_4_scaling from 0.11.1 on, not 0.11.0 ({_SDISTS}); the architecture "
              f"itself is in {_REGISTRY} of 0.8.3. "
              "Ministral 3 uses Llama 4-style attention scaling (NVIDIA Megatron Bridge, "
              "bridge.models.ministral3.ministral3_provider, MinistralTEDotProductAttention)"),
    FirstVllm("architecture MistralLarge3ForCausalLM (Mistral Large 3)", "0.12.0",
              "architecture MistralLarge3ForCausalLM",
              f"{_REGISTRY}: in 0.12.0, not in 0.11.2; vllm/transformers_utils/configs/"
              "mistral.py adapt_config_dict maps a params.json MoE with shared experts to it "
              f"from 0.12.0 on, 0.11.x to MixtralForCausalLM ({_SDISTS})"),
    FirstVllm("--tokenizer-mode deepseek_v32", "0.13.0", "tokenizer_mode deepseek_v32",
              f"TokenizerMode in vllm/config/model.py: in 0.13.0, not in 0.12.0 ({_SDISTS})"),
)
_BY_NEED = {row.need.split(" (")[0]: row for row in FIRST_VLLM}
# Models whose Hub repo has no config.json (Mistral's native params.json only): the
# architecture vLLM derives for them (FIRST_VLLM's Mistral Large 3 row).
MODEL_ARCHITECTURES = {MISTRAL_LARGE_3.lower(): "MistralLarge3ForCausalLM"}


@dataclass(frozen=True)
class WorkerImage:
    image: str
    vllm_version: str
    source: str


WORKER_IMAGES: tuple[WorkerImage, ...] = (  # the default first
    WorkerImage(DEFAULT_VLLM_IMAGE, VLLM_VERSION,
                "AWS Machine Learning Blog, 'Managed Tiered KV Cache and Intelligent Routing for "
                "Amazon SageMaker HyperPod' (2025-11-26); github.com/aws/deep-learning-"
                "containers vllm/x86_64/gpu/Dockerfile (FROM vllm/vllm-openai:v0.11.1)"),
    WorkerImage(f"{DLC}:0.19.1-gpu-py312-cu129-ubuntu22.04-ec2", "0.19.1",
                f"{_DLC_DATA}0.19.1-gpu-ec2.yml (tags; packages: vllm 0.19.1, cuda 12.9, the "
                "default's CUDA, so the same node driver; the vLLM release hyperpod_notes "
                "recommends for kvaware routing)"),
)
_KNOWN = {w.image: w for w in WORKER_IMAGES}
# Tags that name the vLLM release: the DLC's <version>-gpu-... (each docs/src/data/vllm/
# <version>-gpu-ec2.yml lists tags starting with its version) and vLLM's own vllm/vllm-openai:
# v<version> (the DLC Dockerfile is FROM docker.io/vllm/vllm-openai:v<version>).
_TAG_VERSION = (re.compile(re.escape(DLC) + r":(\d+\.\d+\.\d+)-gpu-"),
                re.compile(r"(?:docker\.io/)?vllm/vllm-openai:v(\d+\.\d+\.\d+)$"))


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def image_vllm_version(image: str) -> str | None:
    """The vLLM release ``image`` runs, or None when lmikit cannot tell."""
    if image in _KNOWN:
        return _KNOWN[image].vllm_version
    for pattern in _TAG_VERSION:
        match = pattern.match(image)
        if match:
            return match.group(1)
    return None


def model_needs(model_id: str, architectures: Iterable[str],
                options: Iterable[tuple[str, str]]) -> list[FirstVllm]:
    """What the model needs from vLLM: its architectures (``config.json``'s, else
    :data:`MODEL_ARCHITECTURES`) and its option values (flag, value), where the table has them."""
    names = list(architectures) or ([MODEL_ARCHITECTURES[model_id.lower()]]
                                    if model_id.lower() in MODEL_ARCHITECTURES else [])
    keys = [f"architecture {a}" for a in names] + [f"{flag} {value}" for flag, value in options]
    return [_BY_NEED[k] for k in keys if k in _BY_NEED]


def unknown_architectures(model_id: str, architectures: Iterable[str]) -> list[str]:
    """Architectures the table has no row for (``["?"]`` when the model names none)."""
    names = list(architectures) or ([MODEL_ARCHITECTURES[model_id.lower()]]
                                    if model_id.lower() in MODEL_ARCHITECTURES else [])
    if not names:
        return ["?"]
    return [a for a in names if f"architecture {a}" not in _BY_NEED]


@dataclass(frozen=True)
class WorkerChoice:
    image: str
    vllm_version: str | None  # None: lmikit cannot tell
    needed: FirstVllm | None  # the newest thing the model needs, if the table knows it
    picked: bool  # lmikit chose an image newer than the default for the model


def _newest(needs: list[FirstVllm]) -> FirstVllm | None:
    return max(needs, key=lambda r: version_tuple(r.version)) if needs else None


def choose_worker_image(model_id: str, architectures: Iterable[str],
                        options: Iterable[tuple[str, str]],
                        requested: str | None = None) -> WorkerChoice:
    """The worker image for the model; ``requested`` is the image asked for (None: choose).

    Raises :class:`RenderError` when the requested image's vLLM is known and older than the
    model needs, or when no known image serves the model.
    """
    needed = _newest(model_needs(model_id, architectures, options))
    if requested is not None:
        version = image_vllm_version(requested)
        if version is not None and needed is not None \
                and version_tuple(version) < version_tuple(needed.version):
            raise RenderError(
                f"vllm_image {requested!r} runs vLLM {version}, but {model_id} needs vLLM >= "
                f"{needed.version} ({needed.need}: {needed.source}): the worker would fail to "
                f"load it. Use {_serving(needed)}, or leave --vllm-image out and lmikit picks it")
        return WorkerChoice(requested, version, needed, picked=False)
    if needed is None or version_tuple(WORKER_IMAGES[0].vllm_version) >= \
            version_tuple(needed.version):
        return WorkerChoice(DEFAULT_VLLM_IMAGE, VLLM_VERSION, needed, picked=False)
    for known in WORKER_IMAGES[1:]:
        if version_tuple(known.vllm_version) >= version_tuple(needed.version):
            return WorkerChoice(known.image, known.vllm_version, needed, picked=True)
    raise RenderError(
        f"{model_id} needs vLLM >= {needed.version} ({needed.need}: {needed.source}), newer "
        f"than every vLLM image lmikit knows ({', '.join(w.vllm_version for w in WORKER_IMAGES)}"
        "): pass --vllm-image (vllm_image=) with a vLLM that serves it, or use neither an "
        "LMCache tier nor intelligent routing (kv_cache.mode 'off', routing.strategy "
        "'least_outstanding' or 'random') so the manifest runs the LMI worker")


def _serving(needed: FirstVllm) -> str:
    fits = [w.image for w in WORKER_IMAGES
            if version_tuple(w.vllm_version) >= version_tuple(needed.version)]
    return f"an image with a newer vLLM (lmikit knows {fits[0]})" if fits else \
        "an image with a newer vLLM"


def choice_note(model_id: str, architectures: Iterable[str], choice: WorkerChoice) -> str | None:
    """What a person should know about the chosen worker image, or None."""
    needed = choice.needed
    if choice.vllm_version is None:
        need = (f"{model_id} needs vLLM >= {needed.version} ({needed.need})" if needed else
                f"lmikit's table does not say which vLLM {model_id} needs")
        return (f"lmikit cannot check vllm_image {choice.image!r}: its vLLM version is not in "
                "lmikit's table of worker images (lmikit.render.WORKER_IMAGES) and its tag "
                f"does not name one. {need}; make sure the image's vLLM serves it. The flags "
                f"were checked against vLLM {', '.join(w.vllm_version for w in WORKER_IMAGES)} "
                "only")
    if choice.picked and needed is not None:
        return (f"the vLLM worker runs {choice.image} (vLLM {choice.vllm_version}), not the "
                f"default vLLM {VLLM_VERSION} image: {model_id} needs vLLM >= "
                f"{needed.version} ({needed.need}; {needed.source}). Pass --vllm-image to "
                "choose another")
    unknown = unknown_architectures(model_id, architectures)
    if unknown:
        what = "names no architecture" if unknown == ["?"] else \
            f"has architecture(s) {', '.join(unknown)}"
        return (f"{model_id} {what} that lmikit's table of first vLLM releases covers "
                "(lmikit.render.FIRST_VLLM): lmikit cannot check that vLLM "
                f"{choice.vllm_version}, the worker image's, serves it")
    return None
