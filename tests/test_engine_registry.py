"""A new engine is a registration, nothing more: a fake engine defined here, registered the way
the engine folders are (parity.extract.engines.register_engine), is reached by `parity check`,
`parity lock` and `parity matrix` through the Engine protocol alone, with its own --fake option,
and gets real verdicts (parity, and drift with a verified fix); `parity forward` takes it as
--engine (its refusals and its interpreter are the fake's) and `parity sweep` runs its cases.

The fake stands in for an engine's run (there is no fake package to run): it reads the served
draft's ids from the config it is handed and names each captured state by SGLang's rule (aux id
k captures the output of layer k, h(k+1)). Every call it gets is recorded, so the test fails
if a command reaches around the protocol (an engine's package, a name, another engine's code).
The training side is the real installed speculators.
"""

from __future__ import annotations

import json

import pytest

from parity import cli
from parity.contract import Provenance, ServingContract, Tap
from parity.contract.reply import ServedForwardReply
from parity.envs import EnvError
from parity.errors import InternalError
from parity.inputs import InputError
from parity.extract import engines
from parity.lock import Lock, read_lock
from parity.releases import Release

from .helpers import LLAMA, ROOT

LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"  # ids [1, 15, 28]: h2, h16, h29 by SGLang's rule
LAYOUT = "h2,h16,h29,h32"


class FakeEngine:
    NAME = "fake"
    FLAG = "--fake"
    RELEASE_NOUN = "a fake release"
    FORWARD_MODULE = "parity.extract.engines.fake.forward_side"  # none: python() refuses first
    FORWARD_REPLY = ServedForwardReply
    IDS_KEYS = {"eagle3": "eagle_config.eagle_aux_hidden_state_layer_ids"}
    RELEASES = ("1.0", "2.0")
    FORWARD_LONG_POSITIONS = False
    SWEEP_FROM = "1.0"

    def __init__(self):
        self.calls: list[tuple] = []
        self.faulty: set[str] = set()  # releases whose probe reply names a failure of parity's own code

    def add_options(self, parser, command):
        if command in ("contract", "check", "matrix", "can-i-deploy", "forward", "sweep"):
            parser.add_argument(self.FLAG, metavar="VERSION", help="the fake engine's release")

    def release_from(self, args):
        return getattr(args, "fake", None)

    def forward_refusal(self, steps):
        return None if steps == 1 else "the fake compares one step only; use --steps 1"

    def python(self, version):
        raise EnvError("the fake engine runs in no interpreter")

    def preflight(self, target, version=None):
        self.calls.append(("preflight", version))

    def probe_serving(self, target, draft, version=None, *, candidates=None, serve_args=None):
        if serve_args is not None:
            raise EnvError("the fake engine resolves no serve command")
        version = version or self.RELEASES[-1]
        if version in self.faulty:  # what a probe's reply carrying INTERNAL_ERROR_KEY is read as
            raise InternalError(self.NAME, version, "AttributeError: 'NoneType' object has no attribute 'ids' "
                                "(at parity/extract/engines/fake/probe.py:1 probe)")
        ids = (draft.config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        if ids is None:
            raise InputError("the fake reads eagle_config's ids only")
        self.calls.append(("probe_serving", version, tuple(ids), tuple(map(tuple, candidates or []))))
        contract = ServingContract(
            side="serving", target_model=target.model, fc_input=self._fed(ids), engine=self.NAME,
            requested_ids=tuple(ids), capture_ids=tuple(ids), ids_source="eagle_config (the fake's read)",
            provenance=Provenance(package=self.NAME, version=version, code_path="tests/test_engine_registry.py"))
        tried = [{"ids": list(c), "fc_input": [t.name for t in self._fed(c)], "capture_ids": list(c), "error": None}
                 for c in candidates or []]
        return contract, tried

    def extract_serving(self, target, draft, version=None, *, serve_args=None):
        return self.probe_serving(target, draft, version, serve_args=serve_args)[0]

    def write_ids(self, config, ids, kind="eagle3"):
        self.calls.append(("write_ids", tuple(ids)))
        return {**config, "eagle_config": {**(config.get("eagle_config") or {}),
                                           "eagle_aux_hidden_state_layer_ids": list(ids)}}

    def served_config(self, spec, ids, release=None):
        return self.write_ids(spec, ids)

    def releases(self, wanted):
        return [Release(self.NAME, v, None) for v in (wanted or self.RELEASES)]

    @staticmethod
    def _fed(ids):
        return tuple(Tap.parse(f"h{i + 1}") for i in ids)


@pytest.fixture
def fake():
    impl = engines.register_engine(FakeEngine())
    try:
        yield impl
    finally:
        engines.unregister_engine(impl.NAME)


def parity_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the training side runs the installed speculators
def test_check_reaches_a_registered_engine_through_the_protocol(fake, capsys, tmp_path):
    code, out, err = parity_cli(capsys, "check", "--engine", "fake", "--fake", "1.0", "--target-config", LLAMA,
                                "--draft", LLAMA_DRAFT, "--dump-layout", LAYOUT, "--json")
    result = json.loads(out)
    assert (code, result["verdict"], result["serving"]["engine"]) == (0, "parity", "fake"), err
    assert result["serving"]["provenance"]["version"] == "1.0"
    assert fake.calls[0] == ("preflight", "1.0") and fake.calls[1][:3] == ("probe_serving", "1.0", (1, 15, 28))

    # drift: ids one layer late; the fix is solved from the fake's candidates and verified by
    # writing it where the fake reads ids and serving again
    late = tmp_path / "late"
    late.mkdir()
    config = json.loads((LLAMA_DRAFT / "config.json").read_text())
    config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [2, 16, 29]
    (late / "config.json").write_text(json.dumps(config))
    fake.calls.clear()
    code, out, err = parity_cli(capsys, "check", "--engine", "fake", "--target-config", LLAMA, "--draft", late,
                                "--dump-layout", LAYOUT, "--json")
    result = json.loads(out)
    assert (code, result["verdict"]) == (1, "drift"), err
    assert result["suggestion"]["eagle_aux_hidden_state_layer_ids"] == [1, 15, 28]
    assert result["suggestion"]["verified"] is True and result["suggestion"]["engine"] == "fake"
    assert ("write_ids", (1, 15, 28)) in fake.calls
    assert [c[2] for c in fake.calls if c[0] == "probe_serving"] == [(2, 16, 29), (1, 15, 28)]


def test_another_engines_release_flag_is_refused_for_a_registered_engine(fake, capsys):
    code, _, err = parity_cli(capsys, "check", "--engine", "fake", "--sglang", "0.5.23", "--target-config", LLAMA,
                              "--draft", LLAMA_DRAFT, "--dump-layout", LAYOUT)
    assert code == 2 and err.strip() == ("parity: --sglang names an SGLang release, but the engine is fake: "
                                         "use --fake VERSION")
    assert fake.calls == []


@pytest.mark.slow  # the training side runs the installed speculators
def test_lock_and_matrix_reach_a_registered_engine(fake, capsys, tmp_path):
    path = tmp_path / "contracts" / "fake.json"
    code, out, err = parity_cli(capsys, "lock", path, "--engine", "fake", "--target-config", LLAMA,
                                "--draft", LLAMA_DRAFT, "--dump-layout", LAYOUT)
    assert code == 0, err
    assert read_lock(path).engine == "fake" and json.loads(path.read_text())["engine"] == "fake"

    fake.calls.clear()
    code, out, err = parity_cli(capsys, "check", "--lock", path, "--json")  # the lock names its engine
    assert (code, json.loads(out)["verdict"]) == (0, "parity"), err
    assert fake.calls[0] == ("preflight", None) and fake.calls[1][0] == "probe_serving"

    fake.calls.clear()
    code, out, err = parity_cli(capsys, "matrix", "--lock", path, "--fake", "1.0,2.0", "--speculators", "0.9.0",
                                "--no-verify", "--json")
    m = json.loads(out)
    assert (code, m["engine"], m["ok"]) == (0, "fake", True), err
    assert [r["version"] for r in m["serving"]] == ["1.0", "2.0"]
    assert sorted(c[1] for c in fake.calls if c[0] == "probe_serving") == ["1.0", "2.0"]


@pytest.mark.slow  # the training side runs the installed speculators
def test_an_internal_error_in_one_matrix_cell_is_that_cells_error(fake, capsys):
    """parity's own code failing under one serving release is that cell's error, reported on
    stderr and exit 3 at the end; the other releases are still answered."""
    fake.faulty.add("2.0")
    code, out, err = parity_cli(capsys, "matrix", "--engine", "fake", "--fake", "1.0,2.0", "--speculators", "0.9.0",
                                "--target-config", LLAMA, "--draft", LLAMA_DRAFT, "--dump-layout", LAYOUT,
                                "--no-verify", "--json")
    assert code == 3, err
    m = json.loads(out)
    one, two = m["serving"]
    assert (one["version"], [v["verdict"] for v in one["verdicts"]], one.get("internal_error")) == ("1.0", ["parity"], None)
    assert two["version"] == "2.0" and two["internal_error"] is True and two["verdicts"] == []
    assert two["error"].startswith("parity's own code failed running fake 2.0: AttributeError")
    assert m["ok"] is False
    assert err.strip().splitlines() == [f"parity: internal error: {two['error']}"]


def test_a_lock_names_a_registered_engine_only(fake, tmp_path):
    """Lock.engine is any registered engine's name: the fake while it is registered, never an unknown one."""
    data = json.loads((ROOT / "contracts" / "llama-3.1-8b-eagle3.json").read_text())
    assert Lock.model_validate({**data, "engine": "fake"}).engine == "fake"
    engines.unregister_engine("fake")
    with pytest.raises(ValueError, match="unknown engine 'fake'"):
        Lock.model_validate({**data, "engine": "fake"})


@pytest.mark.parametrize("path", sorted((ROOT / "contracts").glob("*.json")), ids=lambda p: p.stem)
def test_the_committed_locks_load_and_write_back_byte_identical(path):
    text = path.read_text()
    assert Lock.model_validate_json(text).model_dump_json(indent=2) + "\n" == text


@pytest.mark.parametrize("argv, says", [
    (["--engine", "fake", "--steps", "3"], "--engine fake --steps 3: the fake compares one step only; use --steps 1"),
    (["--fake", "1.0"], "--fake names a fake release: add --engine fake"),
    (["--engine", "fake", "--fake", "1.0", "--steps", "1"], "the fake engine runs in no interpreter"),
])
def test_forward_reaches_a_registered_engine(fake, capsys, argv, says):
    """--engine fake is a choice, --fake its release flag; the refusal and the interpreter (which
    the fake refuses before any case is built) are the fake's own."""
    code, _, err = parity_cli(capsys, "forward", "--fixture", "llama-8l", *argv)
    assert code == 2 and err.strip() == f"parity: {says}"
    assert fake.calls == []


def test_sweep_runs_a_registered_engines_cases(fake, capsys):
    """The fake declares where its sweep starts: `parity sweep` takes its --fake RANGE, and a row
    of it is every serving case probed through the protocol, as a real engine's row is."""
    from parity.sweep.cases import SERVING_CASES
    from parity.sweep.run import describe_cases, run_release

    code, _, err = parity_cli(capsys, "sweep", "--fake", "none", "--sglang", "none", "--vllm", "none",
                              "--speculators", "none")
    assert code == 2 and err.strip() == "parity: --fake none --sglang none --vllm none --speculators none: nothing to sweep"
    assert list(describe_cases()["fake"]) == [c.name for c in SERVING_CASES]
    row = run_release("fake", "2.0", {"seconds": 0.0})
    assert row["cases"]["llama32 [1,15,28]"]["fc"] == ["h2", "h16", "h29"]
    assert row["cases"]["llama32 top-level [1,15,28]"] == {"error": "the fake reads eagle_config's ids only",
                                                            "outcome": "engine refuses"}  # its InputError
    assert sorted({c[1] for c in fake.calls if c[0] == "probe_serving"}) == ["2.0"]
