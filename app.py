#!/usr/bin/env python3
"""CDK entry point: ``npx cdk synth`` (default spec) or ``npx cdk synth -c spec=a.yaml,b.yaml``.

See docs/cdk.md. Runs with the project's virtualenv active (``python3 app.py``).
"""

import os

# jsii warns about Node 20 on every start; the CLI pins a tested Node-compatible CDK.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import sys  # noqa: E402

from lmikit.errors import LmikitError  # noqa: E402
from lmikit_cdk.app import build_app  # noqa: E402

if __name__ == "__main__":
    try:
        build_app().synth()
    except LmikitError as exc:  # spec, plan and render problems: say what, not a traceback
        print(f"{exc.kind}: {exc}", file=sys.stderr)
        sys.exit(1)
