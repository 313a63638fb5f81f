from __future__ import annotations

import subprocess
import sys

import lmikit


def test_all_is_sorted_and_complete():
    assert lmikit.__all__ == sorted(lmikit.__all__)
    assert set(lmikit.__all__) == set(lmikit._EXPORTS)
    for name in lmikit.__all__:
        assert getattr(lmikit, name) is not None


def test_unknown_attribute_raises_attribute_error():
    try:
        lmikit.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_sdk_path_imports_no_cdk_or_boto3():
    code = ("import sys, lmikit, lmikit.cli, lmikit.plan, lmikit.render.env, "
            "lmikit.render.lmcache, lmikit.render.sagemaker, lmikit.loader;"
            "bad = [m for m in ('aws_cdk', 'jsii', 'boto3', 'sagemaker') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_container_shared_modules_use_stdlib_only():
    code = ("import sys; before = set(sys.modules);"
            "import lmikit.sizing, lmikit.catalog.instances, lmikit.catalog.models;"
            "third = {m.split('.')[0] for m in set(sys.modules) - before} - "
            "set(sys.stdlib_module_names) - {'lmikit'};"
            "print(sorted(third)); sys.exit(1 if third else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
