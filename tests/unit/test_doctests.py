"""The examples in the docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.conftest import compiled_by_mypyc

MODULES = ["lmikit.spec._model", "lmikit.spec._loader", "lmikit.planner._planner", "lmikit.sizing",
           "lmikit.artifact",
           "lmikit.catalog._models", "lmikit.catalog._model_options", "lmikit.planner._fit",
           "lmikit.catalog._model_config", "lmikit._files", "lmikit.spec._credentials",
           "lmikit.errors", "lmikit.accept._accept", "lmikit.spec._arguments",
           "lmikit.render._env", "lmikit.render._lmcache",
           "lmikit.render._sagemaker", "lmikit.render._hyperpod", "lmikit.bench",
           "lmikit.bench._long_doc_qa", "lmikit.bench._target",
           "lmikit.catalog._prices", "lmikit.catalog._price_list", "lmikit.testing._pricing",
           "lmikit.catalog._instances", "lmikit.catalog._offers",
           "lmikit.formatters._pyast", "lmikit.sim",
           "lmikit.sim._coefficients",
           "lmikit.sim._engine", "lmikit.sim._tiers", "lmikit.sim._routers",
           "lmikit.sim._workloads", "lmikit.sim._scenario", "lmikit.sim._calibrate",
           "lmikit.sim._bench_format", "lmikit.sim._search",
           "lmikit.sim._gpu_calibration",
           "lmikit.client._endpoint", "lmikit.client._stream", "lmikit.client._openai_sse",
           "lmikit.client._openai",
           "lmikit.names", "lmikit.deploy._change", "lmikit.render._scaling", "lmikit.render._iam",
           "lmikit.testing._iam", "lmikit.testing._validate",
           "lmikit.aws._store", "lmikit.aws._errors", "lmikit.deploy._compare",
           "lmikit.deploy._interrupt", "lmikit.deploy._hooks", "lmikit.cli._simulate",
           "lmikit.cli._sandbox"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    if compiled_by_mypyc(name):  # doctest finds no examples in C functions
        pytest.skip(f"{name} is compiled by mypyc in this install (setup.py)")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
