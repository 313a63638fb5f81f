"""`lmikit sandbox serve` refuses at once, clearly, what it cannot do: a port in use, no moto."""

from __future__ import annotations

import builtins
import logging
import socket

import pytest
from click.testing import CliRunner

from lmikit.cli import main
from lmikit.testing._server import free_port_pair, start_sandbox
from tests.conftest import deadline


@pytest.mark.parametrize("taken", [0, 1])
def test_sandbox_serve_busy_port_names_it_and_says_how_to_choose(taken):
    port = free_port_pair()
    assert port is not None
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port + taken))
        holder.listen()
        with deadline(10):
            result = CliRunner().invoke(main, ["sandbox", "serve", "--port", str(port)])
    assert result.exit_code == 1
    which = "moto" if taken else "the fake SageMaker"
    assert result.output.startswith(f"Error: port {port + taken} on 127.0.0.1 (for {which}) "
                                    "cannot be used: Address already in use. The sandbox "
                                    "listens on PORT and PORT+1; choose another PORT with "
                                    "--port, e.g. --port ")
    assert "Traceback" not in result.output


def test_sandbox_serve_without_moto_names_the_extra(monkeypatch):
    real = builtins.__import__

    def no_moto(name, *args, **kwargs):
        if name == "moto" or name.startswith("moto."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_moto)
    port = free_port_pair()
    assert port is not None
    with deadline(10):
        result = CliRunner().invoke(main, ["sandbox", "serve", "--port", str(port)])
    assert result.exit_code == 1
    assert "moto is not installed: pip install 'lmikit[sandbox]'" in result.output


def test_sandbox_extra_installs_moto():
    """The extra the message names exists and brings moto's server (CI's dev extra too)."""
    import tomllib

    from tests.conftest import ROOT

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(r.startswith("moto[server]") for r in extras["sandbox"])
    assert any(r.startswith("moto[server]") for r in extras["dev"])


def test_sandbox_starts_on_a_free_pair_without_moto():
    port = free_port_pair()
    assert port is not None
    sandbox = start_sandbox(port=port, with_moto=False)
    try:
        assert sandbox.port == port
    finally:
        sandbox.stop()


@pytest.mark.slow
def test_sandbox_serve_prints_no_line_per_request():
    """moto's server is werkzeug's, which logged every S3/IAM/CloudWatch request to stderr
    while the fake SageMaker logged none: noise for a person, and a pipe that fills when the
    output is captured and not read. Only the banner and the goodbye remain."""
    import signal
    import subprocess
    import sys
    import time

    import boto3
    from botocore.exceptions import EndpointConnectionError

    port = free_port_pair()
    assert port is not None
    proc = subprocess.Popen([sys.executable, "-m", "lmikit.cli", "sandbox", "serve", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        s3 = boto3.client("s3", region_name="us-east-1",
                          endpoint_url=f"http://127.0.0.1:{port + 1}")
        for _ in range(300):  # until moto answers
            try:
                s3.list_buckets()
                break
            except EndpointConnectionError:  # not listening yet
                time.sleep(0.1)
        for i in range(20):
            s3.create_bucket(Bucket=f"quiet-{i}")
            s3.list_buckets()
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[-2:] == ["Press Ctrl-C to stop.", "Stopping the sandbox."], out
    assert not [x for x in lines if "HTTP/1.1" in x], out


@pytest.mark.parametrize(("before", "after"), [(logging.NOTSET, logging.WARNING),
                                               (logging.DEBUG, logging.DEBUG)])
def test_sandbox_quiets_werkzeug_only_where_nobody_set_its_level(before, after):
    werkzeug = logging.getLogger("werkzeug")
    kept = werkzeug.level
    werkzeug.setLevel(before)  # setLevel, not the attribute: it also clears logging's cache
    port = free_port_pair()
    assert port is not None
    try:
        sandbox = start_sandbox(port=port)
        try:
            assert werkzeug.level == after
        finally:
            sandbox.stop()
    finally:
        werkzeug.setLevel(kept)


@pytest.mark.parametrize(("value", "says"), [
    ("arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5e", "give ARN=TYPE"),
    ("arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5e=p5e.48xlarge",
     "'p5e.48xlarge' is not an instance type"),
    ("arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1=ml.p5e.48xlarge",
     "is not a training plan ARN"),
])
def test_sandbox_serve_refuses_a_malformed_training_plan_before_starting(value, says,
                                                                         monkeypatch):
    import lmikit.testing._server as server

    def never(*_a, **_k):
        raise AssertionError("the sandbox started")

    monkeypatch.setattr(server, "start_sandbox", never)
    result = CliRunner().invoke(main, ["sandbox", "serve", "--training-plan", value])
    assert result.exit_code == 2
    assert "Invalid value for '--training-plan'" in result.output and says in result.output


def test_sandbox_serve_registers_each_training_plan(monkeypatch):
    import lmikit.testing._server as server
    from lmikit.testing import FakeSageMaker

    fake = FakeSageMaker()

    class Started:
        port, moto_port = 1, 2

        def __init__(self):
            self.fake = fake

        def env(self):
            return {}

        def stop(self):
            pass

    def start(*_a, **_k):
        return Started()

    def interrupted(_seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(server, "start_sandbox", start)
    monkeypatch.setattr("time.sleep", interrupted)
    plan = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/p5e"
    result = CliRunner().invoke(main, ["sandbox", "serve", "--training-plan",
                                       f"{plan}=ml.p5e.48xlarge"])
    assert result.exit_code == 0, result.output
    assert f"Training plan {plan} reserves ml.p5e.48xlarge for endpoints." in result.output
    assert {a: p.instance_type for a, p in fake.plane("us-west-2").training_plans.items()} \
        == {plan: "ml.p5e.48xlarge"}


def test_the_printed_exports_make_the_cli_poll_fast_and_skip_the_iam_wait():
    """With only what `sandbox serve` prints, a deploy polls every half second (not 15 s)
    and does not wait 10 s for IAM (docs/sandbox.md; benchmarks/sandbox_deploy.py)."""
    from lmikit.testing import FakeSageMaker
    from lmikit.testing._server import ENV_KEYS, Sandbox

    printed = Sandbox(FakeSageMaker("us-east-1"), "127.0.0.1", 4566, 4567, None,  # type: ignore[arg-type]
                      None).env()
    assert printed["LMIKIT_POLL_SECONDS"] == "0.5"
    assert printed["LMIKIT_IAM_PROPAGATION_SECONDS"] == "0"
    assert set(printed) == set(ENV_KEYS)  # sandbox() sets and restores every one
