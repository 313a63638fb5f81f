"""The deployment spec: the pydantic model every target is rendered from, its loader (bounded
YAML reads, errors that name the field), its JSON Schema, and the checks of what-if
arguments the planner and the simulator take in place of a spec's fields.

>>> from lmikit.spec import load_spec  # doctest: +SKIP
>>> load_spec("examples/docqa-qwen7b.yaml").model.id  # doctest: +SKIP
'Qwen/Qwen2.5-7B-Instruct'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "AdapterSpec": "lmikit.spec._model",
    "DEFAULT_LMI_VERSION": "lmikit.spec._model",
    "DEFAULT_PREFIX_LENGTH": "lmikit.spec._model",
    "DeploymentSpec": "lmikit.spec._model",
    "INSTANCE_TYPE_PATTERN": "lmikit.spec._model",
    "MAX_SPEC_BYTES": "lmikit.spec._loader",
    "NAME_MAX": "lmikit.spec._model",
    "REMOTE_URL_PATTERN": "lmikit.spec._model",
    "RESERVATION_ARN_PATTERN": "lmikit.spec._model",
    "SCHEMA_FILE": "lmikit.spec._schema",
    "check_arguments": "lmikit.spec._arguments",
    "load_spec": "lmikit.spec._loader",
    "load_spec_text": "lmikit.spec._loader",
    "parse_yaml": "lmikit.spec._loader",
    "read_spec_text": "lmikit.spec._loader",
    "s3_remote_bucket_region": "lmikit.spec._model",
    "spec_json_schema": "lmikit.spec._schema",
    "spec_reference_markdown": "lmikit.spec._schema",
    "validate_data": "lmikit.spec._loader",
    "validate_file": "lmikit.spec._schema",
}

__all__ = [
    "AdapterSpec",
    "DEFAULT_LMI_VERSION",
    "DEFAULT_PREFIX_LENGTH",
    "DeploymentSpec",
    "INSTANCE_TYPE_PATTERN",
    "MAX_SPEC_BYTES",
    "NAME_MAX",
    "REMOTE_URL_PATTERN",
    "RESERVATION_ARN_PATTERN",
    "SCHEMA_FILE",
    "check_arguments",
    "load_spec",
    "load_spec_text",
    "parse_yaml",
    "read_spec_text",
    "s3_remote_bucket_region",
    "spec_json_schema",
    "spec_reference_markdown",
    "validate_data",
    "validate_file",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.spec._arguments import check_arguments
    from lmikit.spec._loader import (
        MAX_SPEC_BYTES,
        load_spec,
        load_spec_text,
        parse_yaml,
        read_spec_text,
        validate_data,
    )
    from lmikit.spec._model import (
        DEFAULT_LMI_VERSION,
        DEFAULT_PREFIX_LENGTH,
        INSTANCE_TYPE_PATTERN,
        NAME_MAX,
        REMOTE_URL_PATTERN,
        RESERVATION_ARN_PATTERN,
        AdapterSpec,
        DeploymentSpec,
        s3_remote_bucket_region,
    )
    from lmikit.spec._schema import (
        SCHEMA_FILE,
        spec_json_schema,
        spec_reference_markdown,
        validate_file,
    )
