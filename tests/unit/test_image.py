"""lmikit's LMI image table is sagemaker-core's ``djl-lmi`` table cut to what lmikit serves,
and every URI it gives is the one ``sagemaker.core.image_uris.retrieve`` gives."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from importlib import resources
from importlib.metadata import version

import botocore.loaders
import botocore.regions
import pytest

from lmikit import image
from lmikit.errors import RenderError
from lmikit.image import lmi_image_uri
from lmikit.lmi_versions import ASYNC_SERVICE, version_tuple
from tests.conftest import ROOT


def _sagemaker_core_table() -> dict:
    import sagemaker

    return json.loads(resources.files(sagemaker).joinpath(image.SOURCE_FILE).read_text())


def _shipped() -> dict:
    return json.loads((ROOT / "sdk/lmikit/catalog/lmi_images.json").read_text())


def test_the_table_is_sagemaker_cores_cut_to_the_versions_lmikit_serves() -> None:
    shipped = _shipped()
    assert shipped["sagemaker_core_version"] == version("sagemaker-core"), (
        "pyproject pins the sagemaker-core the table was cut from: regenerate it with "
        "`python -m lmikit.image > sdk/lmikit/catalog/lmi_images.json` when the pin moves")
    resolver = botocore.regions.EndpointResolver(
        botocore.loaders.create_loader().load_data("endpoints"))

    def ecr_host(region: str) -> str:
        endpoint = resolver.construct_endpoint("ecr", region)
        return endpoint["hostname"] if endpoint else f"ecr.{region}.amazonaws.com"

    expected = image.from_sagemaker_core(_sagemaker_core_table(), ASYNC_SERVICE.version,
                                         ecr_host)
    assert {k: v for k, v in shipped.items() if k != "sagemaker_core_version"} == expected


def test_the_cut_keeps_every_version_from_the_oldest_lmikit_serves() -> None:
    source = _sagemaker_core_table()["versions"]
    kept = set(_shipped()["versions"])
    assert kept == {v for v in source
                    if version_tuple(v) >= version_tuple(ASYNC_SERVICE.version)}
    assert "0.38.0" in kept and "0.32.0" not in kept  # 0.32.0: no async vLLM service


def test_every_uri_equals_sagemaker_cores_retrieve(monkeypatch: pytest.MonkeyPatch) -> None:
    from sagemaker.core import common_utils, image_uris

    # retrieve reads botocore's endpoint data anew on every call: read it once
    monkeypatch.setattr(common_utils, "_botocore_resolver",
                        functools.cache(common_utils._botocore_resolver))
    mismatches = []
    for lmi_version, entry in _shipped()["versions"].items():
        for region in entry["registries"]:
            ours = lmi_image_uri(region, lmi_version)
            theirs = image_uris.retrieve(framework=image.FRAMEWORK, region=region,
                                         version=lmi_version)
            if ours != theirs:
                mismatches.append((lmi_version, region, ours, theirs))
    assert mismatches == []
    # the partitions whose host is not amazonaws.com are among them
    assert lmi_image_uri("cn-north-1", "0.38.0").split("/")[0].endswith(".amazonaws.com.cn")
    assert ".c2s.ic.gov/" in lmi_image_uri("us-iso-east-1", "0.38.0")


def test_lookup_imports_no_sagemaker_package_and_works_without_it() -> None:
    # sys.modules["sagemaker"] = None makes any import of it fail, as when it is absent
    code = ("import sys; sys.modules['sagemaker'] = None;"
            "from lmikit.image import lmi_image_uri;"
            "print(lmi_image_uri('us-west-2', '0.38.0'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "us-west-2.amazonaws.com/djl-inference:0.38.0-lmi" in result.stdout


def test_unknown_version_lists_known_ones() -> None:
    with pytest.raises(RenderError, match=r"lmikit's image table \(sagemaker-core "
                       r"[0-9.]+\) knows: .*0.38.0"):
        lmi_image_uri("us-east-1", "9.9.9")


@pytest.mark.parametrize("region", ["ap-nowhere-9", "xx-nowhere-1"])
def test_unknown_region_lists_available_ones(region: str) -> None:
    with pytest.raises(RenderError, match=f"{region}.*us-east-1"):
        lmi_image_uri(region, "0.38.0")
