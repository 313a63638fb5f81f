"""What the newest catalog models need from LMI and vLLM beyond lmikit's generic options.

Two tables (standard library only), one row per fact, each naming its source:

``OPTION_ROWS``
    model id -> an LMI option (``option.<name>`` in serving.properties, ``OPTION_<NAME>`` in
    the environment) and its exact value. Every name is a field of vLLM's ``EngineArgs``:
    LMI's vLLM handler keeps each option whose name is an ``EngineArgs`` annotation and hands
    it to vLLM's own argument parser (djl-serving master,
    engines/python/setup/djl_python/properties_manager/vllm_rb_properties.py:
    ``get_additional_vllm_engine_args``, ``construct_vllm_args_list``, ``get_engine_args``).
    ``true``/``false`` become ``--name``/``--no-name``, any other value ``--name <value>``,
    and vLLM reads a dict-valued field as JSON (vllm 0.23.0 engine/arg_utils.py
    ``_compute_kwargs``).
``HARDWARE_ROWS``
    a model feature -> the CUDA compute capabilities vLLM has kernels for.

Checked against vLLM v0.23.0's ``EngineArgs``, the vLLM LMI 0.38 ships (djl-serving master
pins ``vllm-0.23.1.dev4+gcd87ce883``, serving/docker/lmi-container-requirements.txt).

Left out on purpose (the reasons: docs/planner-model.md): tool-call and reasoning parsers,
``quantization``/``dtype`` (vLLM reads the FP8 scheme from the checkpoint) and expert
parallelism.

>>> sorted(lmi_options("mistralai/Ministral-3-8B-Instruct-2512").items())[0]
('OPTION_CONFIG_FORMAT', 'mistral')
>>> lmi_options("Qwen/Qwen3-VL-8B-Instruct", tensor_parallel_degree=2)["OPTION_MM_ENCODER_TP_MODE"]
'data'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lmikit.catalog._instances import Gpu
    from lmikit.catalog._models import ModelGeometry

VLLM_VERSION = "0.23.0"

DEEPSEEK_V32 = "deepseek-ai/DeepSeek-V3.2"
MISTRAL_LARGE_3 = "mistralai/Mistral-Large-3-675B-Instruct-2512"
MINISTRAL_3_8B = "mistralai/Ministral-3-8B-Instruct-2512"
QWEN3_VL_8B = "Qwen/Qwen3-VL-8B-Instruct"

_RECIPES = "github.com/vllm-project/recipes"
_LMI_GUIDE = ("github.com/deepjavalibrary/djl-serving (master) "
              "serving/docs/lmi/user_guides/vllm_user_guide.md, Sample Model Configurations")


@dataclass(frozen=True)
class OptionRow:
    """One LMI option a model needs, with why and where that is documented."""

    model_id: str
    option: str  # option.<name>; a vLLM EngineArgs field
    value: str  # exactly what is rendered
    why: str
    source: str
    min_tensor_parallel_degree: int = 1  # the row applies from this TP degree on

    @property
    def env_name(self) -> str:
        return "OPTION_" + self.option.upper()


def _mistral_format(model_id: str, recipe: str) -> tuple[OptionRow, ...]:
    source = (f"https://huggingface.co/{model_id} (model card); {_RECIPES} {recipe} "
              "(vllm serve ... --tokenizer_mode mistral --config_format mistral "
              "--load_format mistral)")
    auto = ("; vLLM 0.23.0 picks the same when the repo has consolidated*.safetensors, set "
            "explicitly as the card does")
    return (
        OptionRow(model_id, "tokenizer_mode", "mistral",
                  "prompts (chat, images, tool calls) are built by mistral_common, the reference "
                  "tokenizer the card is tagged with, not by a Hugging Face chat template" + auto,
                  source),
        OptionRow(model_id, "config_format", "mistral",
                  "geometry, vision encoder and FP8 scheme are read from the native params.json"
                  + auto, source),
        OptionRow(model_id, "load_format", "mistral",
                  "weights load, and download, from consolidated*.safetensors only (vllm 0.23.0 "
                  "model_loader/default_loader.py): a repo that also carries Hugging Face shards "
                  "is not fetched twice" + auto, source),
    )


OPTION_ROWS: tuple[OptionRow, ...] = (
    OptionRow(DEEPSEEK_V32, "tokenizer_mode", "deepseek_v32",
              "the release has no Jinja chat template (the card points to its Python encoder); "
              "vLLM's deepseek_v32 tokenizer mode encodes chat messages and tool calls that way. "
              "vLLM 0.23.0 picks it for DeepseekV32ForCausalLM on its own (config/model.py), "
              "set explicitly as the recipe does",
              f"https://huggingface.co/{DEEPSEEK_V32} (model card, Chat Template); {_RECIPES} "
              "DeepSeek/DeepSeek-V3_2.md (vllm serve ... --tokenizer-mode deepseek_v32)"),
    *_mistral_format(MISTRAL_LARGE_3, "Mistral/Mistral-Large-3.md"),
    *_mistral_format(MINISTRAL_3_8B, "Mistral/Ministral-3-Instruct.md"),
    OptionRow(QWEN3_VL_8B, "limit_mm_per_prompt", '{"image":4,"video":0}',
              "vLLM reserves memory for the largest multimodal input it may see (999 items per "
              "modality by default, vllm 0.23.0 config/multimodal.py); video inputs reserve the "
              "most, so image-only serving turns video off and caps images per prompt, as LMI's "
              "tested Qwen3-VL configuration does",
              f"{_LMI_GUIDE} (Qwen3 VL 32B Instruct: OPTION_LIMIT_MM_PER_PROMPT); "
              "djl-serving master tests/integration/llm/prepare.py (qwen3-vl-32b-instruct); "
              f"{_RECIPES} Qwen/Qwen3-VL.md (Configuration Tips: --limit-mm-per-prompt.video 0)"),
    OptionRow(QWEN3_VL_8B, "mm_encoder_tp_mode", "data",
              "the vision encoder is small: replicating it on every rank (data parallel) avoids "
              "tensor-parallel communication that costs more than it saves",
              f"{_RECIPES} Qwen/Qwen3-VL.md (Configuration Tips: --mm-encoder-tp-mode data)",
              min_tensor_parallel_degree=2),
)


@dataclass(frozen=True)
class HardwareRow:
    """GPUs a model feature runs on in vLLM, by CUDA compute capability major version."""

    feature: str  # a ModelGeometry flag
    compute_capability_majors: tuple[int, ...]
    what: str  # the feature, for error messages
    why: str
    source: str


HARDWARE_ROWS: tuple[HardwareRow, ...] = (
    HardwareRow(
        "sparse_attention", (9, 10), "DeepSeek sparse attention",
        "its sparse MLA kernels are FLASHMLA_SPARSE (9.x, 10.x) and FLASHINFER_MLA_SPARSE "
        "(10.x): Hopper and Blackwell, not Ampere or Ada",
        "vllm 0.23.0 v1/attention/backends/mla/flashmla_sparse.py and flashinfer_mla_sparse.py "
        f"(supports_compute_capability); {_RECIPES} DeepSeek/DeepSeek-V3_2-Exp.md (only Hopper "
        "and Blackwell data center GPUs are supported)"),
)


def option_rows(model_id: str, tensor_parallel_degree: int = 1) -> tuple[OptionRow, ...]:
    """The table's rows for a model id (case-insensitive) at a tensor-parallel degree."""
    key = model_id.lower()
    return tuple(r for r in OPTION_ROWS if r.model_id.lower() == key
                 and tensor_parallel_degree >= r.min_tensor_parallel_degree)


def lmi_options(model_id: str, tensor_parallel_degree: int = 1) -> dict[str, str]:
    """The extra LMI options (``OPTION_*`` form) a model needs, sorted by name."""
    return dict(sorted((r.env_name, r.value)
                       for r in option_rows(model_id, tensor_parallel_degree)))


def hardware_rows(geometry: ModelGeometry) -> tuple[HardwareRow, ...]:
    """The hardware rows that apply to a model (its geometry has the row's feature)."""
    return tuple(r for r in HARDWARE_ROWS if getattr(geometry, r.feature, False))


def unsupported_by(geometry: ModelGeometry, gpu: Gpu) -> HardwareRow | None:
    """The first hardware row the GPU does not meet, or None when vLLM can run the model."""
    for row in hardware_rows(geometry):
        if gpu.compute_capability[0] not in row.compute_capability_majors:
            return row
    return None
