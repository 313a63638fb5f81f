"""The third-party packages lmikit imports, and the one line a missing one gives.

``pip install lmikit`` installs ``CORE``; each package of ``OPTIONAL`` is imported only by
the use that needs it, through :func:`require`, and its absence is a
:class:`~lmikit.errors.MissingPackage` naming the ``pip install`` that adds it, never a
traceback. ``tests/unit/test_dependencies.py`` holds both tables to pyproject's lists and to
every import in ``sdk/`` and ``cdk/``.

>>> str(missing_package(ModuleNotFoundError(name="matplotlib"), "lmikit simulate --plot"))
"lmikit simulate --plot needs matplotlib: pip install 'lmikit[plot]'"
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from lmikit.errors import MissingPackage

# top-level module -> its distribution, for [project].dependencies
CORE: dict[str, str] = {
    "boto3": "boto3",
    "botocore": "botocore",
    "click": "click",
    "grafana_foundation_sdk": "grafana-foundation-sdk",
    "pydantic": "pydantic",
    "rich": "rich",
    "urllib3": "urllib3",
    "yaml": "PyYAML",
}
# top-level module -> (its distribution, what `pip install` adds it)
OPTIONAL: dict[str, tuple[str, str]] = {
    "anyio": ("anyio", "lmikit[openai]"),
    "aws_cdk": ("aws-cdk-lib", "lmikit[cdk]"),
    "cdk_nag": ("cdk-nag", "lmikit[cdk]"),
    "constructs": ("constructs", "lmikit[cdk]"),
    "huggingface_hub": ("huggingface_hub", "lmikit[weights]"),
    "jsonschema": ("jsonschema", "jsonschema"),  # lmikit.schema.validate_file only
    "matplotlib": ("matplotlib", "lmikit[plot]"),
    "moto": ("moto", "lmikit[sandbox]"),
    "openai": ("openai", "lmikit[openai]"),
}


def missing_package(exc: ModuleNotFoundError, needed_by: str) -> MissingPackage:
    """The error for ``exc`` (an import that failed) in words: what needs which package,
    and the ``pip install`` that adds it. ``needed_by`` names the use
    (``"lmikit simulate --plot"``)."""
    name = exc.name or ""
    top = name.split(".")[0]
    if top in OPTIONAL:
        distribution, install = OPTIONAL[top]
    else:  # one of lmikit's own dependencies, which a broken install can lack
        distribution = install = CORE.get(top, top)
    if top != name and importlib.util.find_spec(top) is not None:  # too old: lacks a module
        return MissingPackage(f"{needed_by} needs {name}, which the installed {distribution} "
                              f"lacks: pip install --upgrade '{install}'")
    return MissingPackage(f"{needed_by} needs {distribution}: pip install '{install}'")


def require(module: str, needed_by: str) -> ModuleType:
    """``import module``, or :class:`MissingPackage` naming ``needed_by`` and the extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise missing_package(exc, needed_by) from None
