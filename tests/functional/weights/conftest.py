"""Fixtures of the weights staging tests: a fake Hub (``_fake_hub.py``), a bucket in
moto's S3, and no Hub token but the one a test gives."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from ._fake_hub import FakeHub

REGION = "us-east-1"
BUCKET = "staged-models"
MODEL = "org/tiny-model"
TOKEN = "hf_testtoken_secret_value_1234"


def random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


FILES = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n',
    "generation_config.json": b'{"do_sample": true}\n',
    "model-00001-of-00002.safetensors": random_bytes(11 * 1024 * 1024 + 17, 1),
    "model-00002-of-00002.safetensors": random_bytes(1024 * 1024, 2),
    "tokenizer.json": random_bytes(3000, 3),
    "original/consolidated.00.pth": random_bytes(256 * 1024, 4),
}


@pytest.fixture(autouse=True)
def _no_hub_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No token from the environment or a login file; the Hub is the one a test names."""
    from huggingface_hub import constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    fake = FakeHub()
    fake.add_repo(MODEL, FILES)
    yield fake
    fake.close()


@pytest.fixture
def s3(aws: None) -> Any:
    client = boto3.client("s3", region_name=REGION)
    client.create_bucket(Bucket=BUCKET)
    return client
