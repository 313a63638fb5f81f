"""The oldest LMI (djl-serving) version each lmikit feature and catalog model needs.

``engine.lmi_version`` is djl-serving's version, as the sagemaker package's ``djl-lmi`` image
table names images: 0.33.0 is LMI v15, 0.34.0 v16, 0.35.0 v17, 0.36.0 v27 (that table maps
0.36.0 to the last LMI built on djl-serving 0.36.0), 0.38.0 v29. Each row names the
djl-serving release branch (or document) where the feature first appears; a spec asking for
an older version is refused with the feature and its minimum.

>>> min_version_for(["Qwen3ForCausalLM"])
('0.33.0', 'model architecture Qwen3ForCausalLM')
>>> version_tuple("0.36.0") > version_tuple("0.35.0")
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lmikit.catalog import version_tuple
from lmikit.errors import Problem, SpecError

if TYPE_CHECKING:
    from lmikit.spec import DeploymentSpec

DJL = "deepjavalibrary/djl-serving"
NOTES = f"{DJL}@master serving/docs/lmi/release_notes.md"


@dataclass(frozen=True)
class MinVersion:
    """One requirement: ``feature`` works from LMI ``version`` on; ``source`` says why."""

    feature: str
    version: str
    source: str


ASYNC_SERVICE = MinVersion(
    "the async vLLM service (djl_python.lmi_vllm.vllm_async_service)", "0.33.0",
    f"{DJL}@0.33.0-dlc engines/python/setup/djl_python/lmi_vllm/vllm_async_service.py (first "
    "release branch with the file; LMI V15 notes: 'Updated Async Implementation')")
SESSIONS = MinVersion(
    "stateful sessions on the async service", "0.34.0",
    f"{DJL}@0.34.0-dlc vllm_async_service.py VLLMHandler.initialize creates SessionManager "
    "(absent in 0.33.0-dlc); LMI V16 notes: 'Async vLLM handler now supports session-based "
    "sticky routing'")
LORA = MinVersion(
    "LoRA adapters on the async service", "0.34.0",
    f"{NOTES} (LMI V16: 'Async vLLM handler now supports multi-adapter (LoRA) serving')")
FORMATTERS = MinVersion(
    "custom input/output formatters on the async service", "0.34.0",
    f"{DJL}@0.34.0-dlc vllm_async_service.py VLLMHandler.initialize load_formatters; LMI V16 "
    "notes")
ADAPTER_FORMATTERS = MinVersion(
    "per-adapter formatters (adapters/<name>/model.py)", "0.36.0",
    f"{NOTES} (LMI V18, djl-serving 0.36.0: 'adapter-scoped custom code (e.g., model.py)')")
LMCACHE_ENV = MinVersion(
    "LMCache (LMCacheConnectorV1 configured from LMCACHE_* variables)", "0.35.0",
    f"{DJL}@0.35.0-dlc serving/docker/lmi-container-requirements.txt (first to install "
    "lmcache); LMI V17 notes")
LMCACHE_FILE = MinVersion(
    "an LMCache config file (option.lmcache_config_file)", "0.36.0",
    f"{DJL}@0.36.0-lmi19-dlc vllm_async_service.py VLLMHandler.initialize reads "
    "lmcache_config_file (absent in 0.35.0-dlc and 0.36.0-lmi18-dlc; engine.lmi_version "
    "0.36.0 resolves to LMI v27)")
SPECULATIVE = MinVersion(
    "EAGLE speculative decoding (option.speculative_config)", "0.35.0",
    f"{NOTES} (LMI V17 is the first release noting EAGLE(-3) support; vLLM 0.11.1)")

# Architectures (config.json "architectures") -> the first LMI whose vLLM serves them.
# vLLM per release: serving/docker/lmi-container-requirements.txt (0.32.0-dlc on) or
# serving/docker/lmi.Dockerfile's vllm wheel (earlier), on each release branch.
ARCHITECTURES: dict[str, MinVersion] = {
    "Qwen2ForCausalLM": MinVersion(
        "model architecture Qwen2ForCausalLM", "0.28.0",
        f"{DJL}@0.28.0-dlc serving/docker/lmi.Dockerfile (vLLM 0.4.2, which serves Qwen2)"),
    "LlamaForCausalLM": MinVersion(
        "model architecture LlamaForCausalLM (Llama 3.1 rope scaling)", "0.29.0",
        f"{DJL}@0.29.0-dlc serving/docker/lmi.Dockerfile (vLLM 0.5.3.post1, the first with "
        "Llama 3.1's 'llama3' rope scaling; 0.28.0-dlc ships 0.4.2)"),
    "Qwen3ForCausalLM": MinVersion(
        "model architecture Qwen3ForCausalLM", "0.33.0",
        f"{DJL}@0.33.0-dlc serving/docker/lmi-container-requirements.txt (vllm==0.8.4; "
        "vllm-project/vllm issue 17327: v0.8.4 and higher support Qwen3)"),
    "Qwen3VLForConditionalGeneration": MinVersion(
        "model architecture Qwen3VLForConditionalGeneration", "0.35.0",
        f"{NOTES} (LMI V17: 'New models supported - DeepSeek V3.2, Qwen 3 VL')"),
    "DeepseekV32ForCausalLM": MinVersion(
        "model architecture DeepseekV32ForCausalLM", "0.35.0",
        f"{NOTES} (LMI V17: 'New models supported - DeepSeek V3.2, Qwen 3 VL')"),
    "Mistral3ForConditionalGeneration": MinVersion(
        "model architecture Mistral3ForConditionalGeneration (Ministral 3, 2512)", "0.36.0",
        f"{NOTES} (LMI V18, vLLM 0.12.0: the first LMI released after the December 2025 "
        "Mistral 3 models; djl-serving documents no earlier support)"),
    # Mistral Large 3 ships params.json only (lmikit's catalog gives it no architecture);
    # it is matched by model id in MODEL_IDS below.
}
MODEL_IDS: dict[str, MinVersion] = {
    "mistralai/Mistral-Large-3-675B-Instruct-2512": MinVersion(
        "model Mistral Large 3 (2512)", "0.36.0",
        f"{NOTES} (LMI V18, vLLM 0.12.0: the first LMI released after the December 2025 "
        "Mistral 3 models; djl-serving documents no earlier support)"),
}



@dataclass(frozen=True)
class ShippedLmcache:
    """The LMCache an LMI release can hold: exact where its requirements pin it, else the
    versions pip could have resolved when the image was built (``candidates``, oldest
    first). Only ``pip show lmcache`` inside the image settles an unpinned one."""

    release: str
    candidates: tuple[str, ...]
    pinned: bool
    source: str


REQUIREMENTS = "serving/docker/lmi-container-requirements.txt"
PYPI_DATES = "PyPI upload dates of lmcache"
# engine.lmi_version -> its LMCache. The release each version names is the sagemaker package's
# djl-lmi table's (module docstring).
LMCACHE_SHIPPED: dict[str, ShippedLmcache] = {
    "0.35.0": ShippedLmcache(
        "LMI v17", ("0.3.9.post2", "0.3.10.post2"), False,
        f"{DJL}@0.35.0-dlc {REQUIREMENTS} ('lmcache', unpinned); built Nov-Dec 2025, when "
        f"the newest were 0.3.9.post2 (2025-11-11) and 0.3.10.post2 (2025-12-08): {PYPI_DATES}"),
    "0.36.0": ShippedLmcache(
        "LMI v27", ("0.4.5",), False,
        f"{DJL}@0.36.0-lmi27-dlc {REQUIREMENTS} ('lmcache >= 0.3.9', nixl <= 0.10.1, which "
        "rules out 0.4.6-0.5.1: they require nixl >= 1.1.0); listed by "
        "aws/deep-learning-containers PR #6416 on 2026-07-15, before 0.5.2 (2026-07-22)"),
    "0.38.0": ShippedLmcache(
        "LMI v29", ("0.5.4", "0.5.5"), False,
        "no djl-serving source for LMI v29 was found; the sagemaker package maps 0.38.0 to it "
        "from sagemaker-core 2.23.0 (2026-09-24), when the newest were 0.5.4 (2026-08-20) and "
        f"0.5.5 (2026-09-12), assuming master's {REQUIREMENTS} ('lmcache >= 0.3.9'); a later "
        "rebuild of the image could hold a newer one"),
}
# LMCache honours enable_lazy_memory_allocator from 0.3.10 up to, not including, 0.3.13:
# 0.3.9.post2 does not know the key; from 0.3.13 lmcache/v1/storage_backend/
# local_cpu_backend.py logs "LazyMixedMemoryAllocator is temporarily unavailable" and
# allocates the whole max_local_cpu_size (checked 0.3.9.post2 to 0.5.6).
LAZY_ALLOCATOR_HONOURED = ((0, 3, 10), (0, 3, 13))


def release_tuple(version: str) -> tuple[int, ...]:
    """The numeric release of a Python package version: ``"0.3.9.post2"`` -> ``(0, 3, 9)``."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("post")[0])[:3])


def lazy_allocator_honoured(lmi_version: str) -> bool:
    """Whether every LMCache ``lmi_version`` can hold honours enable_lazy_memory_allocator
    (False where lmikit does not know the release's LMCache)."""
    shipped = LMCACHE_SHIPPED.get(lmi_version)
    low, high = LAZY_ALLOCATOR_HONOURED
    return shipped is not None and all(low <= release_tuple(v) < high
                                       for v in shipped.candidates)


def min_version_for(architectures: Iterable[str]) -> tuple[str, str] | None:
    """(version, feature) the newest of ``architectures`` needs, or None if none is known."""
    rows = [ARCHITECTURES[a] for a in architectures if a in ARCHITECTURES]
    if not rows:
        return None
    row = max(rows, key=lambda r: version_tuple(r.version))
    return row.version, row.feature


def requirements(spec: DeploymentSpec, *, uses_lmcache: bool,
                 architectures: Iterable[str] = ()) -> list[MinVersion]:
    """Every requirement this spec has, oldest first."""
    from lmikit.planner._startup import weights_source

    rows = [ASYNC_SERVICE]
    if spec.sessions_enabled:
        rows.append(SESSIONS)
    if spec.lora_enabled:
        rows.append(LORA)
    if spec.formatters.input or spec.formatters.output:
        rows.append(FORMATTERS)
    if any(a.formatter for a in spec.adapters):
        rows.append(ADAPTER_FORMATTERS)
    if uses_lmcache:
        # A stock image on the S3-weights path reads LMCACHE_* variables; every other path
        # names a config file (shipped in the model artifact, or written at start by
        # lmikit's image).
        rows.append(LMCACHE_ENV if weights_source(spec) == "s3-sagemaker" else LMCACHE_FILE)
    if spec.engine.speculative:
        rows.append(SPECULATIVE)
    rows += [ARCHITECTURES[a] for a in architectures if a in ARCHITECTURES]
    if spec.model.catalog_id in MODEL_IDS:
        rows.append(MODEL_IDS[spec.model.catalog_id])
    return sorted(rows, key=lambda r: version_tuple(r.version))


def check_lmi_version(spec: DeploymentSpec, *, uses_lmcache: bool,
                      architectures: Iterable[str] = ()) -> None:
    """Raise :class:`SpecError` (field ``engine.lmi_version``) naming every feature the
    pinned version is too old for, with the minimum each needs."""
    have = version_tuple(spec.engine.lmi_version)
    too_new = [r for r in requirements(spec, uses_lmcache=uses_lmcache,
                                       architectures=architectures)
               if version_tuple(r.version) > have]
    if too_new:
        need = max(too_new, key=lambda r: version_tuple(r.version)).version
        detail = "; ".join(f"{r.feature} needs >= {r.version} ({r.source})" for r in too_new)
        raise SpecError([Problem("engine.lmi_version",
                                 f"is older than this spec needs (use >= {need}): {detail}",
                                 spec.engine.lmi_version)])


def model_architectures(model_id: str, config_path: str | None = None) -> list[str]:
    """``architectures`` of the model's config.json (the file at ``config_path``, else
    lmikit's catalog entry); empty when neither names any."""
    from lmikit.catalog import catalog_entry, read_config_file
    from lmikit.errors import CatalogError

    try:
        if config_path is not None:  # bounded: regular files only, size and depth capped
            raw = read_config_file(config_path)
            config = raw.get("config", raw) if isinstance(raw, dict) else {}
        else:
            config = catalog_entry(model_id).get("config", {})
    except (OSError, ValueError, CatalogError):
        return []
    names = config.get("architectures") if isinstance(config, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
