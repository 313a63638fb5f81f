"""The LMCache-enabled LMI container image: the stock LMI image, or lmikit's build on top of it.

The stock image (``djl-inference:<version>-lmi...``) is resolved offline from lmikit's copy
of sagemaker-core's image table (:mod:`lmikit.image`) and pinned to the spec's
``engine.lmi_version``, never "latest".
lmikit's own image (``container/Dockerfile``, built FROM the stock image with the repository
root as the build context) is used when the deployment needs container-side code the stock
image lacks; see :func:`container_code_reasons`. Synth never runs Docker: a
``DockerImageAsset`` only stages the build context into the cloud assembly, and ``cdk deploy``
builds and pushes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import aws_cdk as cdk
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

from lmikit.errors import RenderError
from lmikit.image import lmi_image_uri
from lmikit.render.iam import ecr_repository_arn
from lmikit.spec import DeploymentSpec

ImageMode = Literal["auto", "stock", "custom"]
IMAGE_MODES: tuple[str, ...] = ("auto", "stock", "custom")
DOCKERFILE = "container/Dockerfile"
BASE_IMAGE_BUILD_ARG = "LMI_IMAGE"  # the ARG container/Dockerfile builds FROM
# The build context is the repository root; only what the image needs is staged (Docker
# ignore syntax: exclude everything, then re-include). The patterns come from the
# Dockerfile's own ``<Dockerfile>.dockerignore`` when it has one (plus the Dockerfile
# itself); this list is the fallback. Keeps the asset hash independent of tests, notebooks,
# virtualenvs and earlier cloud assemblies.
BUILD_CONTEXT_EXCLUDE: tuple[str, ...] = (
    "*",
    "!container",
    "!sdk/lmikit",
    "**/__pycache__",
    "**/*.pyc",
    "**/.DS_Store",
)


def container_code_reasons(spec: DeploymentSpec) -> list[str]:
    """Why this spec needs lmikit's container code (an empty list: the stock image serves it).

    * formatters: lmikit's formatter plumbing (typed formatters, per-adapter dispatch);
    * ``security.hf_token_secret_arn``: the token is fetched from Secrets Manager at start;
    * ``kv_cache.remote_credentials_secret_arn``: the remote tier's credentials are fetched
      from Secrets Manager at start and handed to LMCache only;
    * ``observability.detailed_metrics``: lmikit serves vLLM/LMCache Prometheus metrics at
      ``observability.metrics_path``, which the stock image does not expose.
    """
    reasons = []
    if spec.formatters.input or spec.formatters.output or any(a.formatter
                                                              for a in spec.adapters):
        reasons.append("formatters need lmikit's formatter plumbing")
    if spec.security.hf_token_secret_arn:
        reasons.append("security.hf_token_secret_arn is read from Secrets Manager at start")
    if spec.kv_cache.remote_credentials_secret_arn:
        reasons.append("kv_cache.remote_credentials_secret_arn is read from Secrets Manager at "
                       "start and handed to LMCache")
    if spec.observability.detailed_metrics:
        reasons.append(f"observability.detailed_metrics scrapes "
                       f"{spec.observability.metrics_path}, served by lmikit's metrics bridge")
    return reasons


class LmiImage(Construct):
    """The image the base inference component runs.

    >>> image = LmiImage.for_spec(stack, "Image", spec, mode="stock")  # doctest: +SKIP
    >>> image.image_uri  # doctest: +SKIP
    '763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi20.0.0-cu128'

    :param region: region of the stock image (the deployment's region).
    :param lmi_version: LMI version to pin.
    :param custom: build ``container/Dockerfile`` on top of the stock image (default False).
    :param build_context: repository root holding ``container/`` and ``sdk/``; required
        when ``custom`` is True.
    """

    def __init__(self, scope: Construct, construct_id: str, *, region: str, lmi_version: str,
                 custom: bool = False, build_context: str | Path | None = None,
                 dockerfile: str = DOCKERFILE,
                 exclude: Sequence[str] | None = None) -> None:
        super().__init__(scope, construct_id)
        self.base_image_uri = lmi_image_uri(region, lmi_version)
        self.asset: ecr_assets.DockerImageAsset | None = None
        if not custom:
            self.image_uri = self.base_image_uri
            self.repository_arn = ecr_repository_arn(self.base_image_uri, cdk.Aws.PARTITION)
            return
        if build_context is None:
            raise RenderError("a custom LMI image needs build_context (the repository root "
                              "with container/ and sdk/)")
        context = Path(build_context).resolve()
        if not (context / dockerfile).is_file():
            raise RenderError(f"the custom LMI image needs {dockerfile} under {context}, and "
                              "it is missing; use the stock image (cdk -c lmikit:image=stock) "
                              "or restore the file")
        self.asset = ecr_assets.DockerImageAsset(
            self, "Asset", directory=str(context), file=dockerfile,
            build_args={BASE_IMAGE_BUILD_ARG: self.base_image_uri},
            platform=ecr_assets.Platform.LINUX_AMD64,
            exclude=list(exclude or build_context_exclude(context, dockerfile)),
            ignore_mode=cdk.IgnoreMode.DOCKER,
            display_name="lmikit LMI image")
        self.image_uri = self.asset.image_uri
        self.repository_arn = self.asset.repository.repository_arn

    @classmethod
    def for_spec(cls, scope: Construct, construct_id: str, spec: DeploymentSpec, *,
                 mode: ImageMode = "auto",
                 build_context: str | Path | None = None) -> LmiImage:
        """The image for a spec: ``auto`` builds lmikit's image only when
        :func:`container_code_reasons` lists a reason; ``stock``/``custom`` force a choice."""
        if mode not in IMAGE_MODES:
            raise RenderError(f"image mode must be one of {', '.join(IMAGE_MODES)}, "
                              f"got {mode!r}")
        reasons = container_code_reasons(spec)
        custom = mode == "custom" or (mode == "auto" and bool(reasons))
        image = cls(scope, construct_id, region=spec.region,
                    lmi_version=spec.engine.lmi_version, custom=custom,
                    build_context=build_context)
        if mode == "stock" and reasons:
            cdk.Annotations.of(image).add_warning_v2(
                "lmikit:StockImage", "the stock LMI image is forced but the spec needs "
                "lmikit's container code: " + "; ".join(reasons))
        return image

    @property
    def is_custom(self) -> bool:
        return self.asset is not None


def build_context_exclude(context: Path, dockerfile: str = DOCKERFILE) -> list[str]:
    """Docker-ignore patterns for the staged build context (see BUILD_CONTEXT_EXCLUDE)."""
    ignore = context / f"{dockerfile}.dockerignore"
    if not ignore.is_file():
        return list(BUILD_CONTEXT_EXCLUDE)
    lines = [line.strip() for line in ignore.read_text(encoding="utf-8").splitlines()]
    return [*(line for line in lines if line and not line.startswith("#")), f"!{dockerfile}",
            f"!{dockerfile}.dockerignore"]

