"""``tags``: what SageMaker and IAM accept as tag text, and keys AWS and lmikit reserve."""

from __future__ import annotations

import sys
import unicodedata

import botocore.session
import pytest

from lmikit.errors import SpecError
from lmikit.spec._loader import load_spec_text
from lmikit.spec._model import TAG_TEXT
from tests.unit.test_spec import BASE

ALLOWED_PUNCTUATION = "_.:/=+-@"


def test_tag_text_is_what_botocores_tag_patterns_allow() -> None:
    """botocore's SageMaker and IAM tag shapes allow Unicode letters (L), separators (Z),
    numbers (N) and ``_.:/=+-@``; the spec's rule accepts exactly those code points, as the
    Unicode database of this Python defines the categories."""
    session = botocore.session.get_session()
    sagemaker, iam = session.get_service_model("sagemaker"), session.get_service_model("iam")
    klass = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]"
    assert sagemaker.shape_for("TagKey").metadata["pattern"] == f"({klass}*)"
    assert sagemaker.shape_for("TagValue").metadata["pattern"] == f"({klass}*)"
    assert iam.shape_for("tagKeyType").metadata["pattern"] == f"{klass}+"
    wrong = [hex(cp) for cp in range(sys.maxunicode + 1)
             if bool(TAG_TEXT.fullmatch(chr(cp))) != (
                 unicodedata.category(chr(cp))[0] in "LZN" or chr(cp) in ALLOWED_PUNCTUATION)]
    assert wrong == []


@pytest.mark.parametrize(("tags", "message"), [
    ('";": x', "the tag key ';' has ';': AWS tags take letters, digits, spaces and"),
    ("team: a|b", "the tag value 'a|b' has '|'"),
    ('"a\\n\\u00a7b": x', r"the tag key 'a\n\xa7b' has '\n', '\xa7'"),  # line break, field mark
    ("aws:owner: x", "the aws: prefix is reserved for AWS"),
    ("lmikit:deployment: other", "the lmikit: prefix is reserved for lmikit's own tags"),
])
def test_tags_aws_or_lmikit_would_refuse_are_refused_naming_the_tag(tags: str,
                                                                    message: str) -> None:
    with pytest.raises(SpecError, match="tags") as info:
        load_spec_text(BASE + f"tags:\n  {tags}\n", source="s.yaml")
    assert message in str(info.value)


def test_tags_in_any_script_with_spaces_are_accepted() -> None:
    spec = load_spec_text(BASE + "tags:\n  équipe: données 7\n  cost-center: a/b=c+d@e\n",
                          source="s.yaml")
    assert spec.tags == {"équipe": "données 7", "cost-center": "a/b=c+d@e"}
