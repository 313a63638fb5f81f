"""The fast LMI image lookup agrees with the sagemaker package's own image_uris.retrieve."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lmikit.errors import RenderError
from lmikit.image import _table, lmi_image_uri, retrieve_with_sagemaker


def _cases():
    table = _table()
    assert table is not None, "the sagemaker package's djl-lmi table was not found"
    for version, entry in table["versions"].items():
        for region in entry["registries"]:
            yield version, region


def test_fast_lookup_equals_sagemaker_retrieve_everywhere():
    mismatches = []
    for version, region in _cases():
        lmi_image_uri.cache_clear()
        fast = lmi_image_uri(region, version)
        slow = retrieve_with_sagemaker(region, version)
        if fast != slow:
            mismatches.append((version, region, fast, slow))
    assert mismatches == []


def test_lookup_does_not_import_sagemaker():
    code = ("import sys; from lmikit.image import lmi_image_uri;"
            "print(lmi_image_uri('us-west-2', '0.38.0'));"
            "sys.exit(1 if 'sagemaker' in sys.modules else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "us-west-2.amazonaws.com/djl-inference:0.38.0-lmi" in result.stdout


def test_unknown_version_lists_known_ones():
    with pytest.raises(RenderError, match="knows: .*0.38.0"):
        lmi_image_uri("us-east-1", "9.9.9")


@pytest.mark.parametrize("region", ["ap-nowhere-9", "xx-nowhere-1"])
def test_unknown_region_lists_available_ones(region):
    with pytest.raises(RenderError, match=f"{region}.*us-east-1"):
        lmi_image_uri(region, "0.38.0")
