"""Gated Hugging Face models need a token path on every target that downloads them.

The catalog records each repo's gate with its source (``hub_gate``); a gated repo refuses a
download without the token of an approved account (huggingface_hub ``ModelInfo.gated``).
SageMaker: lmikit's image reads ``security.hf_token_secret_arn``. HyperPod: the operator's
``huggingFaceModel.tokenSecretRef``, a SecretKeySelector (the shared CRD). Staged S3 weights
need no token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lmikit.accept._accept import RenderOptions, accept_spec
from lmikit.catalog._models import CATALOG_DIR, catalog_ids, hub_gate
from lmikit.cli import main
from lmikit.errors import RenderError, SpecError
from lmikit.planner._planner import plan_spec
from lmikit.render._hyperpod import hyperpod_manifest
from lmikit.spec._loader import load_spec_text
from tests.unit.test_render_hyperpod import IMAGE, _errors, crd_validator  # noqa: F401

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SPEC = f"""\
api_version: v1
name: chat-llama
region: us-east-1
model:
  id: {LLAMA}
instance:
  type: ml.g6e.2xlarge
"""
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-token"
K8S_SECRET = "  hf_token_k8s_secret: {name: hf-token, key: token}\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def _with_model_lines(extra: str) -> str:
    return SPEC.replace(f"  id: {LLAMA}\n", f"  id: {LLAMA}\n{extra}")


def test_every_catalog_entry_records_its_hub_gate_with_a_source() -> None:
    for path in sorted(CATALOG_DIR.glob("*.json")):
        gate = json.loads(path.read_text())["hub_gate"]
        assert set(gate) == {"gated", "source"}, path.name
        assert gate["gated"] in (True, False, None), path.name
        assert len(gate["source"]) > 40, path.name
    assert hub_gate(LLAMA).gated is True  # type: ignore[union-attr]
    assert hub_gate("meta-llama/Llama-3.1-70B-Instruct").gated is True  # type: ignore[union-attr]
    assert hub_gate("someone/not-in-the-catalog") is None
    assert len(catalog_ids()) == len(list(CATALOG_DIR.glob("*.json")))


def test_a_gated_hub_model_without_a_token_is_refused_on_both_targets(tmp_path: Path) -> None:
    with pytest.raises(RenderError) as caught:
        accept_spec(_write(tmp_path, SPEC))
    message = str(caught.value)
    assert f"sagemaker: model.id '{LLAMA}' is a gated Hugging Face repo" in message
    assert f"hyperpod: model.id '{LLAMA}' is a gated Hugging Face repo" in message
    assert f"lmikit weights stage {LLAMA} s3://BUCKET/PREFIX/" in message
    assert "security.hf_token_secret_arn" in message  # the SageMaker fix
    assert "model.hf_token_k8s_secret: {name, key}" in message  # the HyperPod fix


def test_the_cli_refuses_it_with_a_non_zero_exit_and_no_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(_write(tmp_path, SPEC))])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "is a gated Hugging Face repo" in result.output


def test_a_secrets_manager_token_on_lmikits_image_is_a_token_path(tmp_path: Path) -> None:
    text = SPEC + f"security:\n  hf_token_secret_arn: {SECRET_ARN}\n"
    path = _write(tmp_path, text)
    accepted = accept_spec(path, targets=("sagemaker", "hyperpod"),
                           options=RenderOptions(image="lmikit"))
    assert "tokenSecretRef" in accepted.output("hyperpod")
    with pytest.raises(RenderError, match="stock LMI image cannot read a Secrets Manager"):
        accept_spec(path, targets=("sagemaker",))  # the stock image has no token path


def test_a_kubernetes_secret_is_rendered_as_the_crds_token_secret_ref(
        tmp_path: Path, crd_validator) -> None:  # noqa: F811
    spec = load_spec_text(_with_model_lines(K8S_SECRET))
    manifest = hyperpod_manifest(spec, plan_spec(spec), image_uri=IMAGE)
    hf = manifest["spec"]["modelSourceConfig"]["huggingFaceModel"]
    assert hf["tokenSecretRef"] == {"name": "hf-token", "key": "token"}
    assert _errors(crd_validator, manifest) == []
    path = _write(tmp_path, _with_model_lines(K8S_SECRET))
    with pytest.raises(RenderError, match=r"sagemaker: model.id .* is a gated") as caught:
        accept_spec(path)  # the Kubernetes secret serves HyperPod only
    assert "hyperpod:" not in str(caught.value)


def test_staged_weights_need_no_token(tmp_path: Path) -> None:
    text = SPEC.replace(f"  id: {LLAMA}\n",
                        f"  id: s3://models-bucket/llama-8b/\n  hub_id: {LLAMA}\n")
    accepted = accept_spec(_write(tmp_path, text))
    assert accepted.plan.model_id == LLAMA
    assert accepted.gate_note is None


def test_a_model_outside_the_catalog_gets_a_note_that_lmikit_cannot_tell(tmp_path: Path) -> None:
    config = Path(__file__).parents[2] / "examples" / "models" / "llama-3.1-8b-config.json"
    text = SPEC.replace(f"  id: {LLAMA}\n", f"  id: someone/llama-8b-finetune\n"
                        f"  config_path: {config}\n")
    path = _write(tmp_path, text)
    note = accept_spec(path).gate_note or ""
    assert "'someone/llama-8b-finetune' is not in lmikit's catalog" in note
    assert "lmikit cannot tell whether its Hugging Face repo is gated" in note
    assert accept_spec(path, targets=("lmcache",)).gate_note is None  # downloads nothing
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "Note: model.id 'someone/llama-8b-finetune' is not in lmikit's catalog" in result.output


@pytest.mark.parametrize(("model_lines", "field", "words"), [
    ("  hub_id: Qwen/Qwen2.5-7B-Instruct\n", "model.hub_id", "with a Hugging Face model.id"),
    ("  hf_token_k8s_secret: {name: Hf_Token, key: token}\n", "model.hf_token_k8s_secret.name",
     "a Kubernetes name"),
    ("  hf_token_k8s_secret: {name: hf-token, key: 'to ken'}\n",
     "model.hf_token_k8s_secret.key", "letters, digits and - _ ."),
])
def test_token_and_staging_fields_refuse_bad_values(model_lines: str, field: str,
                                                    words: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(_with_model_lines(model_lines))
    assert any(p.path == field and words in p.message for p in caught.value.problems), \
        caught.value.problems


def test_a_kubernetes_secret_with_s3_weights_is_refused() -> None:
    text = SPEC.replace(f"  id: {LLAMA}\n", "  id: s3://models-bucket/llama-8b/\n" + K8S_SECRET)
    with pytest.raises(SpecError, match="no Hub token is needed"):
        load_spec_text(text)
