"""SageMaker Models in the fake control plane: CreateModel, DescribeModel, DeleteModel.

A Model is immutable and has no status. The rules follow the service model and its
documentation (botocore's SageMaker ``CreateModelInput``/``ContainerDefinition``): a Model
names a ``PrimaryContainer`` or ``Containers`` (not both), a container takes
``ModelDataUrl`` or ``ModelDataSource`` (not both), and an ``S3Prefix`` data source names a
key prefix, which always ends with "/".
"""

from __future__ import annotations

import copy
from typing import Any

from lmikit.testing._service import validation


class ModelsMixin:
    """Model operations for :class:`lmikit.testing._control.ControlPlane` (which provides
    ``models``, ``tags``, ``arn``, ``_set_tags`` and ``_now_ts``)."""

    models: dict[str, Any]
    tags: dict[str, dict[str, str]]

    def arn(self, kind: str, name: str) -> str:  # pragma: no cover - ControlPlane's
        raise NotImplementedError

    def _set_tags(self, arn: str, tags: list[dict[str, str]] | None) -> None:  # pragma: no cover
        raise NotImplementedError

    def _now_ts(self) -> float:  # pragma: no cover - ControlPlane's
        raise NotImplementedError

    def create_model(self, p: dict[str, Any]) -> dict[str, Any]:
        name = p["ModelName"]
        if name in self.models:
            raise validation(f'Cannot create already existing model "{self.arn("model", name)}".')
        if ("PrimaryContainer" in p) == ("Containers" in p):
            raise validation("Specify exactly one of PrimaryContainer and Containers.")
        for container in [p.get("PrimaryContainer")] + list(p.get("Containers") or []):
            if not container:
                continue
            if "ModelDataUrl" in container and "ModelDataSource" in container:
                raise validation("A container takes ModelDataUrl or ModelDataSource, not both.")
            s3 = container.get("ModelDataSource", {}).get("S3DataSource")
            if s3 and s3["S3DataType"] == "S3Prefix" and not s3["S3Uri"].endswith("/"):
                raise validation(f"S3Uri {s3['S3Uri']!r} must end with '/' for S3DataType "
                                 "S3Prefix (a key name prefix).")
            if not container.get("Image") and not container.get("ModelPackageName"):
                raise validation("A container needs Image (or ModelPackageName).")
        arn = self.arn("model", name)
        self.models[name] = {"request": copy.deepcopy(p), "arn": arn,
                             "created": self._now_ts()}
        self._set_tags(arn, p.get("Tags"))
        return {"ModelArn": arn}

    def describe_model(self, p: dict[str, Any]) -> dict[str, Any]:
        model = self._model(p["ModelName"])
        out = {k: copy.deepcopy(v) for k, v in model["request"].items() if k != "Tags"}
        return {**out, "ModelArn": model["arn"], "CreationTime": model["created"]}

    def list_models(self, p: dict[str, Any]) -> dict[str, Any]:
        rows = [{"ModelName": n, "ModelArn": m["arn"], "CreationTime": m["created"]}
                for n, m in self.models.items() if p.get("NameContains", "") in n]
        rows.sort(key=lambda r: r["CreationTime"],
                  reverse=p.get("SortOrder", "Descending") == "Descending")
        start = int(p.get("NextToken") or 0)
        size = p.get("MaxResults", 10)
        out: dict[str, Any] = {"Models": rows[start:start + size]}
        if start + size < len(rows):
            out["NextToken"] = str(start + size)
        return out

    def delete_model(self, p: dict[str, Any]) -> dict[str, Any]:
        model = self._model(p["ModelName"])
        del self.models[p["ModelName"]]
        self.tags.pop(model["arn"], None)
        return {}

    def model_environment(self, name: str) -> dict[str, str]:
        """The PrimaryContainer environment of a Model (empty when it is gone)."""
        model = self.models.get(name)
        if model is None:
            return {}
        return dict(model["request"].get("PrimaryContainer", {}).get("Environment", {}))

    def _model(self, name: str) -> dict[str, Any]:
        model = self.models.get(name)
        if model is None:
            raise validation(f'Could not find model "{self.arn("model", name)}".')
        return model
