"""The test session runs in one parity workspace: what library calls leave in the temp dir
(the forward cases' served copies, say) is removed when the session ends.

`inject_drift("tests.drift.MODULE", ...)` runs each drift module in place of the probe it
wraps for the rest of the test (through PARITY_PROBE_OVERRIDES, see parity.envs): every
extraction in this process and in the CLI's children then runs the drifted engine or trainer."""

from __future__ import annotations

import pytest

from parity.envs import PROBE_OVERRIDES
from parity.workspace import workspace

from .helpers import EXHAUSTIVE, drift_overrides


@pytest.fixture(scope="session", autouse=True)
def _parity_workspace(tmp_path_factory):
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where pytest keeps it
    with workspace(prefix="parity-tests-"):
        yield


@pytest.fixture
def inject_drift(monkeypatch):
    def inject(*drifts: str) -> None:
        monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides(*drifts))

    return inject


# Modules whose slow tests are `exhaustive` (docs/development.md, 'Test tiers'): each proves a
# behaviour of more releases or cases than the suite's one proof per family and drift, which
# these stay in the suite for: the families' extractions (test_field_sources, test_matrix), the
# planted drifts (tests/drift, every module that injects one), the built draft and its config keys
# on SGLang and speculators (test_built_draft_cases, test_config_keys_read), SpecForge under both
# engines (test_published_corpus's sample, test_verdict_table), the launch (test_launch,
# test_launch_depth, test_launch_algorithm), the forward (test_forward).
EXHAUSTIVE_SLOW_MODULES = frozenset({
    "tests.test_multi_layer_draft", "tests.test_dflash_training", "tests.test_specforge_trained_depth",
    "tests.test_ondemand", "tests.test_sweep_outcome", "tests.test_built_draft_vllm_specforge",
    "tests.test_config_keys_vllm", "tests.test_forward_positions_vllm", "tests.test_launch_matrix",
    "tests.test_installed",  # the wheel outside the checkout; tests/test_ci_recipe.py too
})
# Single tests that prove one older release's own behaviour (the family's extraction stays in
# the suite): DFlash on SGLang 0.5.12-0.5.18 and vLLM 0.22/0.33 (the suite: 0.5.23 and 0.34);
# and three of the parallel layout's seven.
EXHAUSTIVE_SLOW_TESTS = frozenset({
    "test_an_older_sglang_refuses_a_dflash_draft_typed", "test_an_older_sglang_with_dflash_gives_the_contract_by_its_own_code",
    "test_sglang_0_5_12_dflash_contract_follows_an_edit_of_its_model_runner",
    "test_a_moved_dflash_code_path_is_paritys_limit_not_the_releases",
    "test_vllm_0_33_dflash_contract_on_both_runners_and_follows_an_edit_of_v2s_reader",
    "test_vllm_0_22_refuses_a_dflash_draft_as_paritys_limit",
    # the parallel layout: the suite keeps the lost stage's slot, the rank guard followed, vLLM
    # carrying Llama's states over stages and refusing DeepSeek-V3's
    "test_two_tensor_ranks_feed_the_draft_as_trained", "test_a_layout_parity_does_not_run_is_its_limit",
    "test_vllms_answer_follows_the_installed_models_declaration",
})
# Modules whose slow tests stay in the suite only where they plant a drift (their source names
# tests.drift, inject_drift or drift_overrides) or are named in KEPT: the release-by-release and
# case-by-case rest is `exhaustive`.
PLANTED_ONLY_SLOW_MODULES = frozenset({
    "tests.test_vllm", "tests.test_serving_extractor", "tests.test_training_extractor",
    "tests.test_release_families", "tests.test_replay", "tests.test_specforge", "tests.test_mla_draft",
    "tests.test_wrapper_configs",
})
KEPT = frozenset({
    "test_captures_what_sglang_really_captures",  # each captured tensor named numerically, SGLang
    "test_born_from_case",  # speculators' fc input and loss target (0.9.0, 0.3.0: see its params)
    "test_0_33_dumps_the_same_states_with_both_runners",  # vLLM's data-generation dump, both runners
    "test_nested_ids_are_read_by_the_v1_runner_and_ignored_by_v2",  # vLLM's runners feeding differently
    "test_0_34_has_one_runner_which_ignores_nested_ids",
    "test_the_born_from_case_with_a_vllm_made_dump",
    "test_search_recovers_the_training_wiring",  # replay: the wiring a trained draft learned
})


def _plants_a_drift(item) -> bool:
    import inspect

    try:
        source = inspect.getsource(item.function)
    except (OSError, TypeError):
        return True  # unreadable: kept
    return any(word in source for word in ("tests.drift", "inject_drift", "drift_overrides"))


def pytest_collection_modifyitems(config, items):
    """The plugin's items (one per locked contract under contracts/) run both sides' engines in
    child processes: they are `slow`, outside the fast tier (`./dev test --fast`). Tests marked
    `exhaustive` (docs/development.md, 'Test tiers') are deselected unless PARITY_EXHAUSTIVE=1
    (`./dev test --all`): the suite, and so CI, runs one proof per family and per drift."""
    for item in items:
        if item.get_closest_marker("parity") is not None:
            item.add_marker(pytest.mark.slow)
        module = getattr(getattr(item, "module", None), "__name__", "")
        if item.get_closest_marker("slow") is None:
            continue
        if module in EXHAUSTIVE_SLOW_MODULES or getattr(item, "originalname", item.name) in EXHAUSTIVE_SLOW_TESTS or (
                module in PLANTED_ONLY_SLOW_MODULES and getattr(item, "originalname", item.name) not in KEPT
                and not _plants_a_drift(item)):
            item.add_marker(pytest.mark.exhaustive)
    if not EXHAUSTIVE:
        kept = [item for item in items if item.get_closest_marker("exhaustive") is None]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = kept
    if getattr(config.option, "loadgroup", False):  # a pytest-xdist worker under --dist loadgroup
        for item in items:
            _join_xdist_group(item)


def _join_xdist_group(item) -> None:
    """Give a test marked `xdist_group(NAME)` the id `ID@NAME`, by which `--dist loadgroup` sends
    every test of NAME to one worker. pytest-xdist 3.8 does this by setting `item._nodeid`, which
    pytest 9 no longer reads (its nodeid is `str(item._id)`): every group was split between the
    workers, and each built the group's shared fixtures again (test_matrix's matrices: 54 s on
    each worker). tests/test_xdist_groups.py shows the groups held."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    if not names or "@" in item.nodeid.rpartition("]")[2]:
        return
    grouped = f"{item.nodeid}@{'_'.join(names)}"
    node_id = getattr(item, "_id", None)
    if node_id is not None and hasattr(type(node_id), "parse"):
        item._id = type(node_id).parse(grouped)
    else:  # pytest before 9: the id is the string xdist sets
        item._nodeid = grouped


@pytest.fixture(autouse=True)
def _the_fast_tier_runs_no_engine(request, monkeypatch, tmp_path_factory):
    """A test outside `slow` that runs one of parity's own children (an engine, trainer,
    forward or replay probe: a `parity.*` module), or has one answered from the reply cache,
    fails, naming the marker, so the fast tier stays free of engines (one that is stopped
    before it answers, as a Ctrl-C test's, is not counted). Test doubles
    (tests.reply_echo, ...) are not engines. Seen in this process (parity.envs.run_module asks
    for the module) and in every `parity` command the test starts: those inherit a run log
    (parity.runlog, PARITY_RUN_LOG) the test reads back at its end."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    from parity import envs, runlog

    def refuse(module: str) -> None:
        pytest.fail(f"{request.node.nodeid} runs {module} in a child process: mark it @pytest.mark.slow "
                    "(docs/development.md, 'Test tiers')", pytrace=False)

    real = getattr(envs, "module_to_run", None)
    if real is not None:
        def guarded(module: str) -> str:
            if module.startswith("parity."):
                refuse(module)
            return real(module)

        monkeypatch.setattr(envs, "module_to_run", guarded)
    log = tmp_path_factory.mktemp("runlog", numbered=True) / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    yield
    engines = engines_run(log)
    if engines:
        refuse(engines[0])


def engines_run(log) -> list[str]:
    """The parity children (`parity.*` modules) a run log (parity.runlog) records as answered,
    computed or from the cache; a child stopped before it answered (a Ctrl-C test's, interrupted
    at its start) is not counted."""
    import json

    if not log.exists():
        return []
    ran = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r["module"] for r in ran if r["module"].startswith("parity.") and r["status"] != "raised"]
