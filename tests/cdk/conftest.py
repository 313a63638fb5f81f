"""Synthesize every example spec (examples/ and examples/models/, and specs with a LoRA
adapter, a KMS key and a remote-tier secret) once per session.

Everything here runs offline: no AWS credentials, no Docker (a DockerImageAsset only stages
its build context).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lmikit.testing import write_lora_adapter

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted([*(REPO / "examples").glob("*.yaml"),
                   *(REPO / "examples" / "models").glob("*.yaml")])
ADAPTER_MODEL = "Qwen/Qwen2.5-7B-Instruct"


@dataclass
class Synth:
    """One synthesized stack: the construct objects and the template as JSON."""

    stack: Any
    template: dict[str, Any]
    path: Path

    def resources(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == cfn_type}

    def one(self, cfn_type: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(cfn_type)
        assert len(found) == 1, f"expected one {cfn_type}, found {sorted(found)}"
        return next(iter(found.items()))


def write_adapter_spec(root: Path) -> Path:
    """A spec with one local LoRA adapter (tiny fake weights) and its formatter."""
    write_lora_adapter(root / "adapters" / "legal", base_model=ADAPTER_MODEL)
    shutil.copy(REPO / "examples" / "formatters" / "json_answers.py", root / "legal_fmt.py")
    spec = root / "adapters.yaml"
    spec.write_text(f"""api_version: v1
name: docqa-lora
region: us-west-2
model:
  id: {ADAPTER_MODEL}
instance:
  type: ml.g6e.2xlarge
  min_count: 0
  max_count: 3
  copies_per_instance: 1
kv_cache:
  mode: "off"
formatters:
  input: legal_fmt.py
routing:
  strategy: prefix_aware
observability:
  detailed_metrics: false
adapters:
  - name: legal
    source: adapters/legal
    formatter: legal_fmt.py
""")
    return spec


@pytest.fixture(scope="session")
def adapter_spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_adapter_spec(tmp_path_factory.mktemp("adapter-spec"))


KMS_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
KV_SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:kv-redis-AbCdEf"


def write_secure_spec(root: Path) -> Path:
    """A spec with a customer KMS key, a Redis remote tier whose credentials are a Secrets
    Manager secret, and a local LoRA adapter (so both kinds of artifact are copied)."""
    adapters = write_adapter_spec(root).parent / "adapters"
    spec = root / "secure.yaml"
    spec.write_text(f"""api_version: v1
name: secure-redis
region: us-west-2
model:
  id: {ADAPTER_MODEL}
instance:
  type: ml.g6e.2xlarge
kv_cache:
  mode: remote
  remote_url: rediss://cache.internal:6380/0
  remote_credentials_secret_arn: {KV_SECRET}
security:
  kms_key_arn: {KMS_KEY}
adapters:
  - name: legal
    source: {adapters / "legal"}
""")
    return spec


@pytest.fixture(scope="session")
def secure_spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_secure_spec(tmp_path_factory.mktemp("secure-spec"))


@pytest.fixture(scope="session")
def synth_app(adapter_spec_path: Path, secure_spec_path: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One App with a stack per example spec plus the adapter and the KMS/secret specs,
    synthesized once."""
    import aws_cdk as cdk

    from lmikit_cdk.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    specs = [str(p) for p in EXAMPLES] + [str(adapter_spec_path), str(secure_spec_path)]
    app = cdk.App(outdir=str(outdir), context={"spec": ",".join(specs), "lmikit:nag": False})
    build_app(app, build_context=REPO)
    assembly = app.synth()
    return app, assembly


@pytest.fixture(scope="session")
def synths(synth_app: Any) -> dict[str, Synth]:
    """Deployment name -> synthesized stack."""
    from lmikit_cdk.stack import LmiStack

    app, assembly = synth_app
    out = {}
    for child in app.node.children:
        if isinstance(child, LmiStack):
            artifact = assembly.get_stack_artifact(child.artifact_id)
            path = Path(assembly.directory) / artifact.template_file
            out[child.spec.name] = Synth(child, json.loads(path.read_text()), path)
    return out
