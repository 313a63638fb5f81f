"""The AWS regions botocore knows, from the partition data it ships (``partitions.json``).

The file is read where botocore's own loader reads it (``botocore.loaders.Loader.load_data
("partitions")`` finds it at ``<botocore>/data/partitions.json``; a test checks both agree),
without importing ``botocore.loaders``, which costs a tenth of a second at every start.

>>> "us-east-1" in aws_regions(), "us-east-9" in aws_regions()
(True, False)
>>> region_problem("us-east-9")  # doctest: +ELLIPSIS
"is not an AWS region botocore ... knows; did you mean 'us-east-1' or 'us-east-2'? ..."
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

PARTITIONS_FILE = ("data", "partitions.json")  # under the botocore package
GLOBAL_SUFFIX = "-global"  # aws-global, aws-cn-global, ...: endpoints' pseudo-regions


@cache
def aws_regions() -> tuple[str, ...]:
    """Every region of every partition (aws, aws-cn, aws-us-gov, the ISO partitions),
    sorted; the partitions' ``*-global`` pseudo-regions are left out."""
    import botocore

    path = Path(botocore.__file__).parent.joinpath(*PARTITIONS_FILE)
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(sorted(region for partition in data["partitions"]
                        for region in partition["regions"]
                        if not region.endswith(GLOBAL_SUFFIX)))


def close_regions(text: str) -> list[str]:
    """The known regions spelt most like ``text``: those as close as the closest, sorted.

    >>> close_regions("us-east-9"), close_regions("eu-wset-1")
    (['us-east-1', 'us-east-2'], ['eu-west-1'])
    """
    ratios = {r: difflib.SequenceMatcher(None, text, r).ratio() for r in aws_regions()}
    best = max(ratios.values(), default=0.0)
    return sorted(r for r, ratio in ratios.items() if ratio == best >= 0.6)


def region_problem(region: str) -> str | None:
    """Why ``region`` is no region botocore knows (with the closest ones), or None."""
    if region in aws_regions():
        return None
    import botocore

    close = close_regions(region)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    return (f"is not an AWS region botocore {botocore.__version__} knows; {hint}(a region "
            "launched after this botocore needs a newer boto3)")
