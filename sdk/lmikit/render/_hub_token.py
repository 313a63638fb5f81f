"""Gated Hugging Face models: can a target hand the container a Hub token?

A gated repo refuses a download (401/403) without the token of an account its owner
approved. LMI and vLLM read it from ``HF_TOKEN`` (djl-serving ``LmiUtils.java``;
huggingface_hub ``get_token``). lmikit never renders a plaintext token (a CreateModel
``Environment`` is readable through DescribeModel), so the paths are:

- every target: weights staged in S3 with ``lmikit weights stage`` (no token at start);
- SageMaker: lmikit's image, which reads ``security.hf_token_secret_arn`` from Secrets
  Manager at start (the stock image cannot: :func:`lmikit.render.
  stock_image_secret_problems`);
- HyperPod: the operator's ``huggingFaceModel.tokenSecretRef``, "injected as the HF_TOKEN
  environment variable into the InitContainer only" (the shared CRD), named by
  ``model.hf_token_k8s_secret`` or synced from ``security.hf_token_secret_arn``.

Whether a repo is gated is the catalog's ``hub_gate`` (each entry with its source).

>>> from lmikit.spec import DeploymentSpec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "chat",
...     "region": "us-east-1", "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> from lmikit.catalog import hub_gate
>>> gated_problem(spec, "sagemaker", hub_gate(spec.model.id)).split(":")[0]
"model.id 'meta-llama/Llama-3.1-8B-Instruct' is a gated Hugging Face repo (catalog"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from lmikit.catalog import hub_gate

if TYPE_CHECKING:
    from lmikit.catalog import HubGate
    from lmikit.resolve import Resolved
    from lmikit.spec import DeploymentSpec

__all__ = ["gated_problem", "gating_note"]

Target = Literal["sagemaker", "hyperpod"]


def _has_token(spec: DeploymentSpec, target: Target) -> bool:
    """A token reaches ``target``'s container: lmikit's image reads the Secrets Manager
    secret; HyperPod reads a Kubernetes Secret (:func:`lmikit.render.token_secret_ref`)."""
    arn = spec.security.hf_token_secret_arn is not None
    return arn if target == "sagemaker" else arn or spec.model.hf_token_k8s_secret is not None


def gated_problem(spec: DeploymentSpec, target: Target, gate: HubGate | None) -> str | None:
    """Why ``target`` cannot download a gated ``model.id`` as the spec stands, with the
    fixes; None when the model is not gated, unknown, staged in S3, or has a token path.
    ``gate``: the catalog's gate of ``model.id`` (:attr:`lmikit.resolve.Resolved.hub_gate`)."""
    if spec.model.is_s3:
        return None
    if gate is None or not gate.gated or _has_token(spec, target):
        return None
    model = spec.model.id
    fixes = [f"stage the weights in S3 once (`lmikit weights stage {model} s3://BUCKET/PREFIX/` "
             "with HF_TOKEN set or --token-secret ARN), then set model.id to that prefix and "
             f"model.hub_id: {model}"]
    if target == "sagemaker":
        fixes.append("or run lmikit's image (--image lmikit; CDK builds it) with "
                     "security.hf_token_secret_arn naming a Secrets Manager secret that holds "
                     "the token")
    else:
        fixes.append("or name a Kubernetes Secret that holds the token with "
                     "model.hf_token_k8s_secret: {name, key} (rendered as the operator's "
                     "huggingFaceModel.tokenSecretRef)")
    return (f"model.id {model!r} is a gated Hugging Face repo (catalog: {gate.source}), and "
            f"this spec gives {target} no token: the download at start would fail with 401. "
            f"Fix: {'; '.join(fixes)}")


def gating_note(spec: DeploymentSpec, *, resolved: Resolved | None = None) -> str | None:
    """What lmikit cannot tell about a Hub model's gate (outside the catalog, or a catalog
    entry whose gate is not established); None otherwise. ``resolved``: the gate, looked up
    once."""
    if spec.model.is_s3:
        return None
    gate = resolved.hub_gate if resolved is not None else hub_gate(spec.model.id)
    if gate is not None and gate.gated is not None:
        return None
    why = ("is not in lmikit's catalog" if gate is None else
           "has no established gate in lmikit's catalog (its hub_gate source says why)")
    return (f"model.id {spec.model.id!r} {why}, so lmikit cannot tell whether its Hugging Face "
            "repo is gated. If it is, the download at start fails without a token: stage the "
            "weights (lmikit weights stage), or give security.hf_token_secret_arn (lmikit's "
            "image) or model.hf_token_k8s_secret (HyperPod)")
