"""The base model's artifact: a deterministic .tar.gz that LMI unpacks as its model dir.

It carries ``serving.properties`` (the model definition, ``option.model_id``, and the LMI
options that are not in the container's environment), the LMCache config
(OPTION_LMCACHE_CONFIG_FILE is relative to the model dir) and the base model's formatters as
``model.py`` (built by :func:`lmikit.formatters.build_model_py`: validated, self-contained,
raises :class:`lmikit.errors.AdapterError` on a bad formatter file). With LoRA and LMCache both
on, that ``model.py`` also drops client cache tags (:mod:`lmikit.lora`), so it is
written even without formatters.

There is no artifact when SageMaker copies the S3 weights into /opt/ml/model (network
isolation): the directory then holds the user's weights, and the options travel in the
SageMaker Model's environment (:func:`lmikit.render.model_environment`). With LoRA and
LMCache on, the isolating ``model.py`` must then be in the weights' S3 prefix itself
(:func:`weights_model_py`): ``lmikit weights stage --lora-isolation`` writes it, and
``lmikit deploy`` checks it is there before it creates anything.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from lmikit.artifact import deterministic_tar
from lmikit.catalog import ImageKind
from lmikit.formatters import build_model_py
from lmikit.planner import Plan
from lmikit.render._env import SERVING_PROPERTIES, serving_properties
from lmikit.render._lmcache import LMCACHE_FILE_NAME, render_lmcache_yaml
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec


def model_artifact_files(spec: DeploymentSpec, plan: Plan, base_dir: str | Path = ".", *,
                         image: ImageKind = "stock", resolved: Resolved | None = None
                         ) -> dict[str, bytes]:
    """File name -> bytes of the artifact; empty when there is no artifact to ship."""
    resolved = resolved_for(spec, plan, image, resolved)
    if resolved.sagemaker_copies_weights:
        return {}
    files: dict[str, bytes] = {SERVING_PROPERTIES: serving_properties(
        spec, plan, image=image, resolved=resolved).encode()}
    if plan.uses_lmcache:
        files[LMCACHE_FILE_NAME] = render_lmcache_yaml(plan).encode()
    fmt = spec.formatters
    isolate = resolved.isolates_base
    if fmt.input or fmt.output or isolate:
        base = Path(base_dir)
        files["model.py"] = build_model_py(
            input_file=base / fmt.input if fmt.input else None,
            output_file=base / fmt.output if fmt.output else None,
            isolate_base=isolate).encode()
    return files


def weights_model_py(spec: DeploymentSpec, plan: Plan, *, resolved: Resolved | None = None
                     ) -> bytes | None:
    """The ``model.py`` the S3 weights prefix must hold when SageMaker copies it into
    /opt/ml/model and LoRA runs with LMCache: the base model's isolating one (LMI loads
    <model dir>/model.py's formatters, ``VLLMHandler.initialize`` -> ``load_formatters``,
    djl-serving vllm_async_service.py). None when the prefix needs none. ``resolved``: the
    decisions of (spec, plan) for any image kind (this file does not depend on it)."""
    resolved = resolved_for(spec, plan, None, resolved)
    if not (resolved.sagemaker_copies_weights and resolved.isolates_base):
        return None
    return base_isolation_model_py()


def base_isolation_model_py() -> bytes:
    """The base model's ``model.py`` with no formatter: it drops client cache tags and
    adapter picks (:mod:`lmikit.formatters.isolation`)."""
    return build_model_py(isolate_base=True).encode()


def model_artifact(spec: DeploymentSpec, plan: Plan, base_dir: str | Path = ".", *,
                   image: ImageKind = "stock", resolved: Resolved | None = None
                   ) -> bytes | None:
    """The artifact bytes, or None when there is nothing to ship."""
    files = model_artifact_files(spec, plan, base_dir, image=image, resolved=resolved)
    return deterministic_tar(files) if files else None


def read_artifact_files(data: bytes) -> dict[str, bytes]:
    """The files of a model artifact (.tar.gz), by name: what LMI unpacks.

    >>> from lmikit.artifact import deterministic_tar
    >>> read_artifact_files(deterministic_tar({"serving.properties": b"engine=Python"}))
    {'serving.properties': b'engine=Python'}
    """
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for member in tar.getmembers():
            if member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    out[member.name.removeprefix("./")] = handle.read()
    return out


def parse_properties(text: str) -> dict[str, str]:
    """``serving.properties`` as a dict (``key=value`` lines; ``#``/``!`` comments skipped;
    no line continuations or escapes, which lmikit's renderer does not write for keys).

    >>> parse_properties("# c\noption.model_id=Qwen/Qwen3-8B\nengine = Python")
    {'option.model_id': 'Qwen/Qwen3-8B', 'engine': 'Python'}
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out
