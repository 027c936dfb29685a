"""Shared fixtures: the real Fashion-MNIST, loaded once per test session."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from lazylab import xla_cache

# The session's throwaway folders live under one root, removed when the session ends.
SCRATCH = Path(tempfile.mkdtemp(prefix="lazylab-test-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def _scratch(name: str) -> str:
    (SCRATCH / name).mkdir()
    return str(SCRATCH / name)


# Tests must not touch the user's memo or environment-selected data.
os.environ.pop("LAZYLAB_STRICT_PLUGINS", None)
# Nor the user's ./out: figures and tables written by default go to a throwaway folder.
os.environ["LAZYLAB_OUT"] = _scratch("out")
# Nor the user's compilation cache; one shared by the whole session (its CLI subprocesses and
# Ray workers included) spares each test the compiles an earlier one did.
os.environ["LAZYLAB_XLA_CACHE"] = _scratch("xla")
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# Nor the user's memo (~/.cache/lazylab/memo by default, lazylab.cache.default_dir): a command run
# without --cache-dir uses a throwaway one (memo_dir gives a test its own).
os.environ["LAZYLAB_CACHE"] = _scratch("memo")
# Nor the user's calibration (lazylab.calibration): a throwaway cache home holding the development
# machine's figures as this machine's, so no command in a test spends 25-55 s measuring it.
os.environ["XDG_CACHE_HOME"] = _scratch("home")
xla_cache.enable()

from cli_helpers import pinned  # noqa: E402  (after the environment above: it imports the CLI)

# Tests load the units they test and no other: a third-party plugin installed beside lazylab,
# broken or not, changes nothing here (the entry points are pinned, cli_helpers.PINNED_UNITS).
os.environ["LAZYLAB_ARMS"] = pinned()


def _keep_reference_calibration() -> None:
    import dataclasses

    from lazylab import calibration
    from lazylab.config import code_identity

    calibration.save(dataclasses.replace(calibration.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1))


_keep_reference_calibration()
# Estimates scale with the share of the cores a command gets (lazylab.calibration.cpu_share); tests fix it,
# so that a figure does not depend on what else runs beside them.
os.environ["LAZYLAB_CPU_SHARE"] = "1"


@pytest.fixture(scope="session")
def fmnist():
    """The real dataset (60k/10k), parsed once into a session cache."""
    from lazylab import data

    return data.load(None, cache_dir=Path(_scratch("datacache")))


@pytest.fixture(scope="module", autouse=True)
def _free_module_folders(request, tmp_path_factory):
    """Remove the temporary folders a test module made once it has passed.

    Most tests own a memo, and every memo holds a parsed copy of the data (53 MB): kept until the
    session ends, they would fill several GB of a CI machine's disk. A module with a failure keeps
    its folders to be looked at (and pytest's tmp_path_retention_policy keeps a failed test's).
    """
    basetemp = tmp_path_factory.getbasetemp()
    before, failed = set(basetemp.iterdir()), request.session.testsfailed
    yield
    if request.session.testsfailed == failed:
        for path in set(basetemp.iterdir()) - before:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def memo_dir(tmp_path, monkeypatch):
    """A fresh memo directory, also exported as LAZYLAB_CACHE."""
    d = tmp_path / "memo"
    monkeypatch.setenv("LAZYLAB_CACHE", str(d))
    return d


@pytest.fixture(scope="module")
def case_folder(tmp_path_factory):
    """``case_folder(name)``: a new folder for one hypothesis example, where tmp_path cannot serve (hypothesis runs
    all of a test's examples under one function-scoped fixture: they would share its folder). Each call removes
    the folder of the call before it, so a fuzzed test holds one copy of a memo at a time; hypothesis ends a
    failing test by replaying the failing example, whose folder stays."""
    made = []

    def folder(name: str) -> Path:
        while made:
            shutil.rmtree(made.pop(), ignore_errors=True)
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]

    return folder


# Slow tests (the `slow` marker, pyproject.toml) in files whose tests are marked here rather than by
# `@pytest.mark.slow` beside them; every parametrization of a name listed is slow. They train on real
# data, run ladders or subprocesses, or share a module fixture that does; `pytest -m "not slow"`
# leaves them out: the quick check after an install (README).
SLOW = frozenset({
    "tests/test_cli.py::test_ladder_runs_on_real_data_and_second_run_computes_nothing",
    "tests/test_cli.py::test_bracketing_picks_the_best_rate",
    "tests/test_cli.py::test_huge_rate_is_refused_and_a_bad_run_still_writes_strict_json",
    "tests/test_cli.py::test_json_dash_prints_the_results_alone_on_stdout_and_writes_no_file_named_dash",
    "tests/test_estimate.py::test_runs_are_counted_against_a_partly_filled_memo",
    "tests/test_reliability.py::test_diverging_rate_is_recorded_and_shown",
    "tests/test_reliability.py::test_bracketing_skips_a_diverging_rate_and_table_says_diverged",
    "tests/test_reliability.py::test_an_unwritable_home_adds_nothing_to_stderr",
    # test_reliability.py's tests of the module's `reference` ladder
    "tests/test_reliability.py::test_interrupted_ladder_keeps_finished_runs_and_resumes_identically",
    "tests/test_reliability.py::test_truncated_and_garbage_entries_are_reported_and_recomputed",
    "tests/test_reliability.py::test_older_cache_schema_is_never_misread",
    "tests/test_reliability.py::test_records_of_older_code_are_never_reused_and_the_ladder_says_so",
    "tests/test_reliability.py::test_two_ladders_on_one_memo_agree_and_leave_it_sound",
    "tests/test_reliability.py::test_planted_pickle_under_a_real_run_key_never_executes",
    "tests/test_reliability.py::test_nothing_is_unpickled_on_the_ladder_path",
    "tests/test_reliability.py::test_damaged_parsed_data_copy_is_one_line_and_reparsed",
    "tests/test_reliability.py::test_swapped_compiled_programs_are_removed_and_compiled_again",
    "tests/test_reliability.py::test_full_disk_on_an_output_file_is_one_line_and_leaves_no_temporary",
    "tests/test_reliability.py::test_full_disk_on_write_is_one_line_error_and_keeps_every_finished_run",
    "tests/test_reliability.py::test_disk_filling_up_mid_ladder_is_one_line_error_and_keeps_every_finished_run",
    "tests/test_reliability.py::test_read_only_memo_is_one_line_error",
    "tests/test_reliability.py::test_same_configuration_twice_gives_bit_identical_records",
    # test_reference.py's tests of the module's `tiny` ladder
    "tests/test_reference.py::test_an_exported_reference_reads_back_and_agrees_with_its_records",
    "tests/test_reference.py::test_a_payload_from_before_the_unstable_field_gets_it_from_its_loss_curves",
    "tests/test_reference.py::test_a_changed_record_breaks_the_check",
    "tests/test_reference.py::test_a_bad_reference_file_is_one_line",
    "tests/test_reference.py::test_the_export_script_refuses_an_incomplete_memo_in_one_line",
    # test_trajectory.py's tests of the module's `traj` run, and two more trajectories
    "tests/test_trajectory.py::test_epoch_zero_is_the_initialisation_exactly_and_has_not_travelled",
    "tests/test_trajectory.py::test_snapshot_hook_does_not_change_training",
    "tests/test_trajectory.py::test_second_run_recomputes_nothing",
    "tests/test_trajectory.py::test_config_key_covers_snapshots_and_run",
    "tests/test_trajectory.py::test_pictures_open_loop_and_stay_small",
    "tests/test_trajectory.py::test_non_image_prototypes_get_curves_and_a_note",
    "tests/test_trajectory.py::test_bracketed_rate_is_the_ladders",
    "tests/test_trajectory.py::test_cli_end_to_end_then_from_the_memo",
    # test_verify.py's tests of the module's `tiny` reference
    "tests/test_verify.py::test_a_reference_computed_here_is_reproduced_bit_for_bit",
    "tests/test_verify.py::test_a_planted_difference_on_a_stable_run_is_diverged_and_exits_1",
    "tests/test_verify.py::test_a_planted_difference_on_an_unstable_run_is_reported_and_exits_0",
    "tests/test_verify.py::test_an_arm_of_other_code_is_skipped_and_said_so",
    "tests/test_verify.py::test_bad_input_is_one_line_and_exit_2",
    "tests/test_verify.py::test_other_data_or_a_bad_reference_file_is_one_line_and_exit_2",
    "tests/test_verify.py::test_dry_run_prints_the_plan_and_computes_nothing",
    "tests/test_bracket.py::test_a_real_ladder_records_its_bracket_rule_and_runs",
    "plugins/lazylab-rff/tests/test_rff.py::test_units_depend_only_on_their_own_draws_so_prefixes_are_smaller_banks",
    "plugins/lazylab-rff/tests/test_rff.py::test_features_approximate_the_gaussian_kernel_at_the_median_bandwidth",
    "plugins/lazylab-rff/tests/test_rff.py::test_features_are_sqrt2_cos_of_w_x_plus_b_as_in_rbfsampler",
})


def pytest_collection_modifyitems(config, items):
    """Mark the tests named in SLOW (every parametrization of each) as `slow`."""
    for item in items:
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker(pytest.mark.slow)
