"""Start-up timeouts and the instance volume: each rule stated and checked on numbers."""

from __future__ import annotations

import math

import pytest

from lmikit.planner import _startup as st
from lmikit.planner._planner import plan

GB = 10**9


def _expected_timeout(seconds: float) -> int:
    """The rule: 1.5x, rounded up to a minute, never below 600 s nor above 3600 s."""
    return min(3600, max(600, math.ceil(1.5 * seconds / 60) * 60))


@pytest.mark.parametrize("weight_gb", [1, 15, 60, 145, 400, 1400])
@pytest.mark.parametrize("source", ["hub", "s3", "s3-sagemaker"])
def test_startup_timeouts_follow_the_stated_rule(weight_gb, source):
    e = st.estimate_startup(weight_gb * GB, source)
    rate = {"hub": 100e6, "s3": 1e9, "s3-sagemaker": 0}[source]
    in_container = weight_gb * GB / rate if rate else 0
    load, warmup = weight_gb * GB / 500e6, 300
    assert e.health_check_timeout_s == _expected_timeout(in_container + load + warmup)
    sm = weight_gb * GB / 1e9 if source == "s3-sagemaker" else 0
    assert e.download_timeout_s == _expected_timeout(sm)
    assert 60 <= e.download_timeout_s <= 3600 and 60 <= e.health_check_timeout_s <= 3600


def test_startup_72b_from_the_hub_needs_far_more_than_600_s():
    """Qwen2.5-72B: ~145 GB; at 100 MB/s the download alone is ~24 min."""
    e = st.estimate_startup(145_408_131_072, "hub")
    assert e.container_download_s == pytest.approx(1454, abs=1)
    assert e.health_check_timeout_s == 3120
    assert not e.capped


def test_startup_model_loading_timeout_never_below_the_health_check_or_the_image():
    """LMI must not give up before SageMaker does; the image's 1200 s is only ever raised."""
    small = st.estimate_startup(3 * GB, "hub")
    assert small.health_check_timeout_s == 600
    assert small.model_loading_timeout_s == 1200
    big = st.estimate_startup(145 * GB, "hub")
    assert big.model_loading_timeout_s == big.health_check_timeout_s > 1200


def test_startup_beyond_the_api_maximum_is_capped_and_warned():
    e = st.estimate_startup(1350 * GB, "hub")  # a 675B model in bf16
    assert e.capped
    assert e.health_check_timeout_s == 3600
    warning = st.startup_warning(e)
    assert warning and "exceeds SageMaker's 3600 s limit" in warning
    assert "the SageMaker targets refuse" in warning
    assert st.startup_warning(st.estimate_startup(15 * GB, "hub")) is None


def test_startup_sagemaker_copy_counts_against_the_download_timeout_only():
    e = st.estimate_startup(145 * GB, "s3-sagemaker")
    assert e.container_download_s == 0
    assert e.sagemaker_download_s == pytest.approx(145)
    assert e.download_timeout_s == _expected_timeout(145)
    assert e.health_check_timeout_s == _expected_timeout(145 * GB / 500e6 + 300)


def test_startup_rejects_negative_weights():
    with pytest.raises(ValueError, match="weight_bytes"):
        st.estimate_startup(-1, "hub")


def test_volume_on_nvme_is_the_instance_store_less_every_copy():
    v = st.instance_volume(nvme_gb=450, weight_bytes=15 * GB, copies=2)
    assert (v.kind, v.size_gb, v.volume_size_in_gb) == ("nvme", 450, None)
    assert v.weights_gb == pytest.approx(1.1 * 30)
    assert v.free_bytes == int((450 - 33) * GB)


def test_volume_without_nvme_requests_an_ebs_volume_sized_for_the_weights():
    """1.1x the weights of every copy, over the 0.9 usable share, 30..512 GB."""
    v = st.instance_volume(nvme_gb=0, weight_bytes=16 * GB, copies=2)
    assert v.kind == "ebs"
    assert v.volume_size_in_gb == math.ceil(1.1 * 32 / 0.9)
    assert st.instance_volume(0, 1 * GB, 1).volume_size_in_gb == 30
    assert st.volume_problem(v) is None


def test_volume_problem_when_the_weights_cannot_fit():
    too_big = st.instance_volume(nvme_gb=0, weight_bytes=300 * GB, copies=2)
    assert too_big.volume_size_in_gb == 512
    assert "largest EBS volume" in (st.volume_problem(too_big) or "")
    nvme = st.instance_volume(nvme_gb=250, weight_bytes=300 * GB, copies=1)
    assert "instance's NVMe" in (st.volume_problem(nvme) or "")


def test_plan_disk_tier_fits_what_the_weights_leave():
    """A disk tier written into the LMCache file (stock image: nobody re-sizes it at start)
    plus every copy's weights fits the instance's NVMe."""
    p = plan("Qwen/Qwen2.5-72B-Instruct", "ml.p4de.24xlarge", tp=4, copies=2,
             context_tokens=8_000_000)
    assert p.tier == "cpu+disk" and p.volume is not None
    disk_total = p.lmcache["max_local_disk_size_gb"] * 2**30 * p.lmcache["workers"]
    weights = p.volume.weights_gb * GB
    assert disk_total <= 0.9 * (8000 * GB - weights)  # 90% of what the weights leave
    assert disk_total + weights <= 8000 * GB
    assert disk_total > 0.85 * (8000 * GB - weights)  # and not much less


def test_plan_shows_expected_start_and_warns_past_the_cap():
    """The what-if plan warns; a spec past the cap is refused (tests/unit/test_examples.py)."""
    p = plan("Qwen/Qwen2.5-72B-Instruct", "ml.p4de.24xlarge", tp=4)
    assert p.startup is not None and p.startup.expected_s > 1800
    start = p.to_dict()["startup"]
    assert start["pin_s"] > 0  # the CPU tier, pinned whole
    assert start["health_check_timeout_s"] == _expected_timeout(
        start["container_download_s"] + start["load_s"] + start["pin_s"] + 300)
    assert any("start-up rates are assumptions, none published by AWS: Hub download 100 MB/s"
               in a for a in p.assumptions)
    huge = plan("deepseek-ai/DeepSeek-V3.2", "ml.p5e.48xlarge", tp=8)
    assert huge.startup is not None and huge.startup.capped
    assert any("exceeds SageMaker's 3600 s limit" in w for w in huge.warnings)


# The S3 rate is an assumption with a stated basis, not a SageMaker-published figure: no AWS
# source gives one (lmikit.planner.RATES "s3"). Rule: the smaller of 1 GB/s and half the
# instance's network bandwidth (third-party EC2 runs reached 50-64% of a 100 Gbit/s network).
@pytest.mark.parametrize(("network_gbit", "rate"), [
    (0, 1e9),  # unknown network: the 1 GB/s ceiling
    (10, 625e6),  # ml.g5.xlarge: half of 10 Gbit/s
    (20, 1e9),  # half of 20 Gbit/s is 1.25 GB/s: the ceiling wins
    (3200, 1e9),  # ml.p5e.48xlarge
])
def test_s3_rate_is_the_smaller_of_1_gbps_and_half_the_network(network_gbit, rate):
    assert st.s3_download_bytes_per_s(network_gbit) == pytest.approx(rate)
    e = st.estimate_startup(100 * GB, "s3", network_gbit)
    assert e.container_download_s == pytest.approx(100 * GB / rate, abs=0.1)


def test_s3_rate_is_labelled_an_assumption_with_its_basis():
    rate, basis = st.RATES["s3"]
    assert rate.endswith("assumed")
    assert "no SageMaker-published rate" in basis and "dvassallo/s3-benchmark" in basis
    p = plan("Qwen/Qwen2.5-1.5B-Instruct", "ml.g5.xlarge")
    line = next(a for a in p.assumptions if a.startswith("start-up rates are assumptions"))
    assert "S3 copy 625 MB/s (the smaller of 1 GB/s and half of 10 Gbit/s" in line


def test_no_faster_loader_is_planned_on_lmis_path():
    """SageMaker's Fast Model Loader left LMI with lmi-dist in 0.35.0 (djl-serving 220cfa53);
    vLLM's Run:ai streamer never sees an s3:// id under LMI (ModelInfo.downloadS3)."""
    assert all(why.startswith("not on") for why in st.FASTER_LOADERS.values())
    assert any("220cfa53" in why for why in st.FASTER_LOADERS.values())
    assert any("downloadS3" in why for why in st.FASTER_LOADERS.values())


@pytest.mark.parametrize(("source", "fix"), [
    ("hub", "lmikit weights stage deepseek-ai/DeepSeek-V3.2 s3://BUCKET/PREFIX/"),
    ("s3", "turn on security.network_isolation"),
    ("s3-sagemaker", "serve a quantized checkpoint"),
])
def test_startup_problem_names_the_cap_and_the_fix(source, fix):
    """botocore: ContainerStartupHealthCheckTimeoutInSeconds and
    ModelDataDownloadTimeoutInSeconds are at most 3600; past that, the spec is refused."""
    e = st.estimate_startup(4000 * GB, source, 3200)
    problem = st.startup_problem(e, "deepseek-ai/DeepSeek-V3.2")
    assert problem and problem.startswith("model.id 'deepseek-ai/DeepSeek-V3.2': ")
    assert fix in problem and "3600 s" in problem
    timeout = ("ModelDataDownloadTimeoutInSeconds" if source == "s3-sagemaker"
               else "ContainerStartupHealthCheckTimeoutInSeconds")
    assert timeout in problem
    assert st.startup_problem(st.estimate_startup(15 * GB, source), "m/x") is None


@pytest.mark.parametrize("pinned_gb", [0, 20, 94, 400])
def test_startup_counts_pinning_the_whole_cpu_tier(pinned_gb):
    """LMCache >= 0.3.13 ignores enable_lazy_memory_allocator and pins all of
    max_local_cpu_size at start (local_cpu_backend.py); one cudaHostAlloc pins ~1.15 GB/s
    (third party: novitalabs/pegaflow PR #277, 20 GB in 17.4 s; NVIDIA/cudf PR #23457 measured
    ~2.2 GB/s on EC2 g6.4xlarge; the slower is used), inside the container health check."""
    e = st.estimate_startup(15 * GB, "hub", pinned_bytes=pinned_gb * GB)
    pin = pinned_gb * GB / 1.15e9
    assert e.pin_s == pytest.approx(pin, abs=0.1)
    assert e.health_check_timeout_s == _expected_timeout(15 * GB / 100e6 + 15 * GB / 500e6
                                                         + pin + 300)
    assert e.expected_s == pytest.approx(st.estimate_startup(15 * GB, "hub").expected_s + pin,
                                         abs=0.1)


def test_plan_pins_the_largest_workers_cpu_tier():
    """The plan passes the biggest tier one worker allocates: max_local_cpu_size, or the
    first rank's share where an MLA model stores from the first rank only."""
    p = plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.4xlarge", context_tokens=500_000)
    assert p.tier == "cpu" and p.startup is not None
    assert p.startup.pin_s == pytest.approx(
        p.lmcache["max_local_cpu_size_gb"] * 2**30 / st.PIN_BYTES_PER_S, abs=0.1)
    mla = plan("mistralai/Mistral-Large-3-675B-Instruct-2512", "ml.p5e.48xlarge", tp=8,
               context_tokens=10**9)
    first = mla.lmcache["first_rank_max_local_cpu_size_gb"]
    assert mla.startup is not None and first > mla.lmcache["max_local_cpu_size_gb"]
    assert mla.startup.pin_s == pytest.approx(first * 2**30 / st.PIN_BYTES_PER_S, abs=0.1)
    off = plan("Qwen/Qwen2.5-1.5B-Instruct", "ml.p4de.24xlarge", context_tokens=10_000)
    assert off.tier == "none" and off.startup is not None and off.startup.pin_s == 0
