"""The command line: versions, and bad input as one line with exit code 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from parity import cli

from .helpers import DEEPSEEK, LLAMA, ROOT, sglang_draft

KIMI = str(ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3")


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_version_names_every_side(capsys):
    rc, out, _ = run(capsys, "--version")
    assert rc == 0
    for name in ("parity", "sglang 0.5.23", "speculators 0.9.0", "torch", "transformers"):
        assert name in out


def test_python_dash_m_works():
    out = subprocess.run([sys.executable, "-m", "parity", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("parity ")


def _configs(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"num_hidden_layers": 32,')
    no_layers = tmp_path / "nolayers.json"
    no_layers.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}')
    return bad_json, no_layers


@pytest.mark.parametrize("case", [
    "missing target", "malformed target", "no layer count", "missing draft", "malformed draft",
    "out-of-range ids", "duplicate ids", "bad tap name",
    *(pytest.param(c, marks=pytest.mark.slow) for c in ("dump width", "hidden size")),  # found after the speculators probe
    "unknown speculators", "no dump description",
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, case):
    bad_json, no_layers = _configs(tmp_path)
    target, draft, layout = str(LLAMA), sglang_draft(tmp_path / "d", ids=[1, 15, 28]), "h2,h16,h29,h32"
    extra: list[str] = []
    if case == "missing target":
        target = str(tmp_path / "nope.json")
    elif case == "malformed target":
        target = str(bad_json)
    elif case == "no layer count":
        target = str(no_layers)
    elif case == "missing draft":
        draft = tmp_path / "nodraft"
    elif case == "malformed draft":  # its own folder: sglang_draft's is shared by every test of the run
        draft = tmp_path / "malformed"
        draft.mkdir()
        (draft / "config.json").write_text("[1, 2")
    elif case == "out-of-range ids":
        draft = sglang_draft(tmp_path / "d2", ids=[1, 15, 40])
    elif case == "duplicate ids":
        draft = sglang_draft(tmp_path / "d2", ids=[1, 15, 15])
    elif case == "bad tap name":
        layout = "h2,hx,h29"
    elif case == "dump width":
        layout = "h2,h16,h29,h30,h32"  # a 4-state fc for a draft with 3 aux ids
    elif case == "hidden size":
        draft = sglang_draft(tmp_path / "d2", ids=[1, 15, 28], hidden_size=7168)
    elif case == "unknown speculators":
        extra = ["--speculators", "0.1.0"]
    args = ["check", "--target-config", target, "--draft", str(draft)]
    if case != "no dump description":
        args += ["--dump-layout", layout]
    rc, out, err = run(capsys, *args, *extra)
    assert rc == 2, (case, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("parity: "), err
    assert "Traceback" not in err + out


def test_unknown_architecture_is_exit_2(tmp_path, capsys):
    cfg = json.loads(LLAMA.read_text())
    cfg.update(architectures=["FooForCausalLM"], model_type="foo")
    target = tmp_path / "config.json"
    target.write_text(json.dumps(cfg))
    rc, out, err = run(capsys, "contract", "serving", "--target-config", str(target),
                       "--draft", str(sglang_draft(tmp_path / "d", ids=[1, 15, 28])))
    assert rc == 2 and "not supported" in err and len(err.strip().splitlines()) == 1


def test_json_error_object(tmp_path, capsys):
    rc, out, _ = run(capsys, "check", "--target-config", str(tmp_path / "x.json"), "--draft", KIMI,
                     "--dump-layout", "h0,h3,h31,h59", "--json")
    assert rc == 2 and json.loads(out)["verdict"] == "error"


@pytest.mark.slow  # runs the speculators probe
def test_contract_json_has_the_documented_keys(capsys):
    rc, out, _ = run(capsys, "contract", "training", "--target-config", str(DEEPSEEK),
                     "--dump-layout", "h0,h3,h31,h59", "--json")
    data = json.loads(out)
    assert rc == 0 and data["fc_input"] == ["h0", "h3", "h31"] and data["target_model"]["num_hidden_layers"] == 61
    assert data["target"] == "h59"
    assert "target_not_final_layer" in [f["kind"] for f in data["findings"]]


def test_schema_is_json(capsys):
    rc, out, _ = run(capsys, "schema")
    assert rc == 0 and "TrainingContract" in json.loads(out)["$defs"]


@pytest.mark.parametrize("command", ["contract", "check", "matrix", "lock"])
def test_bad_tap_name_names_the_accepted_forms(tmp_path, capsys, command):
    """`--dump-layout h3,h0.delta,...`: one line naming the bad name, why it is bad (h0 has no
    delta), and the accepted forms (not pydantic's "1 validation error for Tap")."""
    name = "h0.delta"
    layout = f"h3,{name},h31,h59"
    args = {"contract": ["contract", "training", "--target-config", str(DEEPSEEK)],
            "check": ["check", "--target-config", str(DEEPSEEK), "--draft", KIMI],
            "matrix": ["matrix", "--target-config", str(DEEPSEEK), "--draft", KIMI],
            "lock": ["lock", str(tmp_path / "x.json"), "--target-config", str(DEEPSEEK), "--draft", KIMI],
            }[command] + ["--dump-layout", layout]
    rc, out, err = run(capsys, *args)
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("parity: --dump-layout"), err
    assert "validation error" not in err
    assert repr(name) in err
    for form in ("h<K>", "h<K>.delta", "h<K>.normed", "h<K>.ln", "final"):
        assert form in err, err
    assert "h0 (the embedding) has no layer update" in err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow  # a full check: both probes
def test_one_check_reads_each_input_file_once(capsys, monkeypatch):
    """The target config and the draft config are read once, at the CLI, and handed down as
    `Target` and `Draft`: the preflight, the training side, the gate, its verified fix and the
    export advice never open them again. Opens in this process are counted (the engine's own
    process reads the draft directory it serves, as production does; the reply cache hashes
    the served bytes to key the engine's reply, which is not a read of the input)."""
    import builtins
    import io
    import traceback
    from pathlib import Path

    target, draft_config = DEEPSEEK.resolve(), (Path(KIMI) / "config.json").resolve()
    opened: list[Path] = []
    real = io.open

    def counting(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and not any(f.name == "path_digest" for f in traceback.extract_stack()):
            opened.append(Path(file).resolve())
        return real(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    rc, out, err = run(capsys, "check", "--target-config", str(DEEPSEEK), "--draft", KIMI,
                       "--dump-layout", "h0,h3,h31,h59")
    assert rc == 1 and "verified" in out, out + err  # the drift, and its fix verified by a second run
    assert opened.count(target) == 1 and opened.count(draft_config) == 1, (
        f"target config opened {opened.count(target)}x, draft config {opened.count(draft_config)}x")
