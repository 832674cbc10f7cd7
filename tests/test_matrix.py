"""The version matrix and can-i-deploy, on the bundled born-from example, under the releases on
each side of its change (SUITE_RELEASES; every installed release with PARITY_EXHAUSTIVE=1).

Every cell is computed by running each release's own code in its own environment; the
expectations are the ones recorded by running those releases (docs/numbering.md,
'SGLang'): the draft config [2, 30, 58] on a 61-layer DeepSeek-V3-class target means
[h3, h31, h59] up to 0.5.12.post1 and [h2, h30, h58] from 0.5.13 on; [-1, 2, 30] crashes,
silently drops a slot, or raises, depending on the release. The matrices are computed
once per file.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from parity import cli
from parity.envs import PROBE_OVERRIDES
from parity.extract.run_until import CodePathMoved, run_until_after, stop_line
from parity.matrix import CANNOT, build_matrix
from parity.releases import releases
from parity.report.matrix import render_markdown, render_text

from .helpers import EXHAUSTIVE, ROOT, built, drift_overrides

TARGET = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
DRAFT = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"
LAYOUT = ["h0", "h3", "h31", "h59"]

# What each release feeds for the born-from draft config [2, 30, 58], and the fix it admits.
SERVED = {"0.5.7": ["h3", "h31", "h59"], "0.5.10": ["h3", "h31", "h59"], "0.5.12.post1": ["h3", "h31", "h59"], "0.5.14": ["h2", "h30", "h58"], "0.5.18": ["h2", "h30", "h58"],
          "0.5.21": ["h2", "h30", "h58"], "0.5.22": ["h2", "h30", "h58"], "0.5.23": ["h2", "h30", "h58"]}
FIX = {"0.5.7": None, "0.5.10": None, "0.5.12.post1": None, "0.5.14": [0, 3, 31], "0.5.18": [0, 3, 31], "0.5.21": [0, 3, 31],
       "0.5.22": [0, 3, 31], "0.5.23": [0, 3, 31]}


# The releases the suite's matrices run: the last release that reads the ids as output-of-layer
# (0.5.12.post1), the first that reads them as layer indices (0.5.14), the newest (0.5.23): one of
# each family the born-from change spans. Every release of SERVED is `exhaustive`
# (PARITY_EXHAUSTIVE=1, `./dev test --all`), as `parity sweep` computes every release's cell.
SUITE_RELEASES = ["0.5.12.post1", "0.5.14", "0.5.23"]
SUITE_TRAINERS = ["0.3.0", "0.9.0"]  # speculators' oldest family and the installed one (every release: exhaustive)


def _minus_one_draft(tmp: Path) -> Path:
    cfg = json.loads((DRAFT / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 2, 30]
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(cfg))
    return tmp


@pytest.fixture(scope="session")
def matrices(tmp_path_factory):
    """Computed once, on the one worker that runs the file (pytestmark), for the session: a module
    fixture is made again each time the worker comes back to the file after another file's tests
    (the clean-clone run built these twice on one worker, 89 s and 81 s). Born-from (all releases) and [-1, 2, 30] (all sglang releases) concurrently; then,
    one at a time (an injected drift holds for the whole process), an unknown release and a
    moved code path."""
    minus_one = _minus_one_draft(tmp_path_factory.mktemp("minus-one"))
    jobs = {
        "born": lambda: build_matrix(TARGET, DRAFT, LAYOUT, serving=None if EXHAUSTIVE else SUITE_RELEASES,
                                     trainer_releases=None if EXHAUSTIVE else SUITE_TRAINERS),
        "minus_one": lambda: build_matrix(TARGET, minus_one, LAYOUT, serving=SUITE_RELEASES, trainer_releases=["0.9.0"],
                                          verify=False),
    }
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {k: pool.submit(fn) for k, fn in jobs.items()}
        result = {k: f.result() for k, f in futures.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_unseen_release_moved"))
        result["unknown"] = build_matrix(TARGET, DRAFT, LAYOUT, serving=["0.5.23"], trainer_releases=["0.9.0"],
                                         verify=False)
    if built("sglang", "0.5.14"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_moved_aux_ids"))
            result["moved"] = build_matrix(TARGET, DRAFT, LAYOUT, serving=["0.5.14"], trainer_releases=["0.9.0"],
                                           verify=False)
    return result


def _need(version: str) -> None:
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")


# One worker runs this file (`./dev test` distributes by --dist loadgroup): each worker running a
# test of it built the matrices again, the second waiting on the first's children in the reply
# cache (65 s of a core idle in the clean-clone run).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_matrix")]


# -- the born-from example -----------------------------------------------------------------------

def test_training_rows_are_the_same_under_both_speculators_releases(matrices):
    m = matrices["born"]
    rows = {r.version: r for r in m.training if r.error is None}
    for version in SUITE_TRAINERS:
        if version not in rows and not built("speculators", version):
            pytest.skip(f"speculators {version}'s environment is not built (./dev setup speculators-{version})")
    assert set(SUITE_TRAINERS) <= set(rows), [r.error for r in m.training]
    for r in rows.values():
        assert r.fc_input == ["h0", "h3", "h31"] and r.target == "h59"
        assert not r.changed


@pytest.mark.parametrize("version", [v if v in SUITE_RELEASES else pytest.param(v, marks=pytest.mark.exhaustive)
                                     for v in sorted(SERVED)])
def test_born_from_cell(matrices, version):
    m = matrices["born"]
    row = next((r for r in m.serving if r.version == version), None)
    if row is None or (row.error and not built("sglang", version)):
        assert row is None or row.error.startswith(CANNOT)  # an unbuilt release is loud, never a pass
        _need(version)
    assert row.error is None, row.error
    assert row.requested_ids == [2, 30, 58]
    assert row.fc_input == SERVED[version]
    assert row.verdicts and all(v.verdict == "drift" for v in row.verdicts)
    for v in row.verdicts:
        assert v.fix == FIX[version], (v.fix, v.unfixable)
        if FIX[version] is None:
            assert "h0" in v.unfixable and "[-1, 2, 30]" in v.unfixable  # h0 is not capturable there
        else:
            assert v.fix_verified


def test_the_plus_one_change_is_highlighted(matrices):
    _need("0.5.12.post1")
    _need("0.5.14")
    m = matrices["born"]
    row = next(r for r in m.serving if r.version == "0.5.14")
    assert "slot 0: h3 -> h2" in row.changed and "slot 2: h59 -> h58" in row.changed
    assert any(c.startswith("fix none on this release -> write [0, 3, 31]") for c in row.changed)
    after = [r for r in m.serving if r.version == "0.5.23"][0]
    assert not any(c.startswith("slot") for c in after.changed)  # 0.5.14 -> 0.5.23: same states
    text = render_text(m)
    assert "* 0.5.14" in text and "slot 0: h3 -> h2" in text
    md = render_markdown(m)
    assert "**[h2, h30, h58]**" in md and "| 0.5.12.post1 |" in md
    data = m.to_json_dict()
    assert not data["ok"] and {r["version"] for r in data["serving"]} >= set(SERVED if EXHAUSTIVE else SUITE_RELEASES) & {
        r.version for r in releases("sglang")}


# -- [-1, 2, 30]: crash, silent drop, raise -------------------------------------------------------

def test_minus_one_crashes_on_0_5_12(matrices):
    _need("0.5.12.post1")
    row = next(r for r in matrices["minus_one"].serving if r.version == "0.5.12.post1")
    assert row.fc_input == [None, None, None]
    assert any("TypeError" in e for e in row.engine_errors)


def test_minus_one_drops_a_slot_silently_on_0_5_14(matrices):
    _need("0.5.14")
    row = next(r for r in matrices["minus_one"].serving if r.version == "0.5.14")
    assert row.fc_input == ["h2", "h30", None]  # only two states captured, no exception
    assert not any("raised" in e for e in row.engine_errors)
    assert any("captured only 2 of 3" in e for e in row.engine_errors)


def test_minus_one_raises_on_0_5_23(matrices):
    row = next(r for r in matrices["minus_one"].serving if r.version == "0.5.23")
    assert row.fc_input == [None, None, None]
    assert any("captured 2 of 3" in e for e in row.engine_errors)


# -- releases parity cannot run are loud ----------------------------------------------------------

def test_a_release_no_family_can_run_is_a_loud_cell(matrices):
    """An unseen release (0.5.99) whose aux-id reader moved: no family's code paths all fit."""
    m = matrices["unknown"]
    row = m.serving[0]
    assert row.error.startswith(f"{CANNOT} sglang 0.5.99: no parity release family can run sglang 0.5.99")
    assert "0.5.23-family adapter: looked for " in row.error
    assert not row.verdicts and not m.ok
    assert CANNOT in render_text(m) and CANNOT in render_markdown(m)


def test_moved_code_path_is_a_loud_cell(matrices):
    _need("0.5.14")
    row = matrices["moved"].serving[0]
    assert row.error.startswith(f"{CANNOT} sglang 0.5.14: CodePathMoved: looked for a statement "
                                "assigning self.eagle_aux_hidden_state_layer_ids"), row.error
    assert not matrices["moved"].ok


def test_undeclared_release_is_a_loud_cell_without_running_anything():
    m = build_matrix(TARGET, DRAFT, LAYOUT, serving=["0.4.0"], trainer_releases=["0.1.0"])
    assert m.serving[0].error.startswith(f"{CANNOT} sglang 0.4.0: no environment pins sglang==0.4.0")
    assert m.training[0].error.startswith(f"{CANNOT} speculators 0.1.0")
    assert not m.ok


# -- can-i-deploy ---------------------------------------------------------------------------------

def test_can_i_deploy_says_no_with_the_reason(capsys):
    version = "0.5.12.post1" if built("sglang", "0.5.12.post1") else "0.5.23"
    rc = cli.main(["can-i-deploy", "--sglang", version, "--speculators", "0.9.0", "--no-verify",
                   "--target-config", str(TARGET), "--draft", str(DRAFT), "--dump-layout", ",".join(LAYOUT)])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert out.startswith(f"no: sglang {version} with speculators 0.9.0: trained on [h0, h3, h31], served ")


def test_can_i_deploy_bad_input_exits_2(capsys):
    assert cli.main(["can-i-deploy", "--sglang", "0.5.23", "--speculators", "0.9.0"]) == 2
    assert cli.main(["can-i-deploy", "--sglang", "9.9", "--speculators", "0.9.0", "--target-config",
                     str(TARGET), "--draft", str(DRAFT), "--dump-layout", "h0,h3,h31,h59"]) == 2
    assert "cannot tell" in capsys.readouterr().err


@pytest.mark.parametrize("as_json", [False, True])
def test_can_i_deploy_error_goes_to_stderr(capsys, as_json):
    """"cannot tell" is an error: one `parity: ...` line on stderr, exit 2; stdout keeps only
    the --json answer."""
    rc = cli.main(["can-i-deploy", "--sglang", "9.9", "--speculators", "0.1.0", "--target-config",
                   str(TARGET), "--draft", str(DRAFT), "--dump-layout", ",".join(LAYOUT)]
                  + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert err.startswith("parity: cannot tell: ") and err.count("\n") == 1, err
    assert "speculators 0.1.0" in err
    if as_json:
        assert json.loads(out)["deploy"] is None
    else:
        assert out == ""


# -- the stopping runner (no engine) --------------------------------------------------------------

class _Runner:
    def __init__(self, a, b=1):
        self.before = a
        try:
            self.ids = {"x": a}["y"]
        except:  # noqa: E722 - the shape the engine's code has
            self.ids = None
        self.after = b
        raise AssertionError("ran past the statement")


@pytest.mark.parametrize("a", [1])
def test_run_until_after_stops_after_the_statement(a):
    obj = run_until_after(_Runner.__init__, "ids", _Runner.__new__(_Runner), a=a)
    assert obj.before == 1 and obj.ids is None and not hasattr(obj, "after")
    with pytest.raises(CodePathMoved, match="self.nothing"):
        stop_line(_Runner.__init__, "nothing")
    with pytest.raises(CodePathMoved, match=r"requires \['a'\]"):
        run_until_after(_Runner.__init__, "ids", _Runner.__new__(_Runner))


def test_matrix_takes_a_lock_alone(capsys):
    """`parity matrix --contract FILE` (the README's form) crashed with a TypeError before any
    extraction; undeclared releases keep this one from running any."""
    lock = ROOT / "contracts" / "kimi-k2.5-eagle3.json"
    m = build_matrix(contract=lock, serving=["0.4.0"], trainer_releases=["0.1.0"])
    assert m.contract == str(lock) and m.dump_layout == LAYOUT and m.draft.endswith("kimi-k2.5-eagle3-fixed")
    rc = cli.main(["matrix", "--contract", str(lock), "--sglang", "0.4.0", "--speculators", "0.1.0"])
    out, err = capsys.readouterr()
    assert rc == 1 and f"lock {lock}" in out and "internal error" not in err, (out, err)
    from parity.inputs import InputError
    with pytest.raises(InputError, match="--contract"):
        build_matrix(dump_layout=LAYOUT)
