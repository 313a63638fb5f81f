"""Which simulator tests are in the slow tier (``-m "not slow"`` leaves them out).

Whole files replay published benchmarks or build the compiled engine; the named tests fit
coefficients by replaying a bench many times, or hold a real-time bound a loaded machine
breaks. tests/unit/test_fast_tier.py checks that every name here is a test that exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

SLOW_FILES = {
    "test_accuracy.py",  # every published figure, simulated
    "test_compiled.py",  # builds the engine with mypyc
    "test_inference_perf.py", "test_llmd.py", "test_llmd_codegen.py",
    "test_llmd_reasoning.py",  # replays of published benchmark runs
}

SLOW_TESTS = {
    "test_calibrate.py": {
        "test_a_bench_that_sits_on_a_bound_is_not_called_too_fast",
        "test_a_decode_the_model_cannot_match_leaves_the_ttft_coefficients_alone",
        "test_a_fit_stays_within_its_time_bound",
        "test_a_remote_rate_past_the_instances_network_is_set_to_the_network",
        "test_a_request_served_by_two_tiers_is_priced_tier_by_tier",
        "test_fit_recovers_disk_and_remote_coefficients_within_5_percent",
        "test_fit_recovers_known_coefficients_within_5_percent",
        "test_fit_replays_the_bench_on_the_copies_that_served_it",
        "test_the_fit_rests_on_measured_outcomes_where_the_file_has_them",
    },
    "test_simulate_cli.py": {
        "test_a_calibrated_what_if_plan_of_a_model_outside_the_catalog_reads_its_config",
        "test_calibrate_reports_the_fit",
        "test_calibrated_plan_states_the_fitted_coefficients_not_the_defaults",
        "test_calibrated_spec_plan_costs_the_spec_with_the_fitted_engine",
        "test_plot_writes_the_format_its_name_says",
    },
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent != HERE:
            continue
        name = item.originalname if isinstance(item, pytest.Function) else item.name
        if item.path.name in SLOW_FILES or name in SLOW_TESTS.get(item.path.name, ()):
            item.add_marker(pytest.mark.slow)
