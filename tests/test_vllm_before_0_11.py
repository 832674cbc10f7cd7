"""vLLM 0.8.5-0.10.x, the releases with EAGLE-3 before the 0.11 family: the 0.8.5 family (the
proposer builds its draft itself) and the 0.9 family (0.9.0-0.10.x), each verified on one
release (0.8.5, 0.10.2), run as a user runs parity on the bundled Llama-3.1-8B draft; each
family refused on the other's source; an edit of the installed capture default, followed."""

from __future__ import annotations

import json
import os

import pytest

from .helpers import MAIN_BYTECODE, LLAMA, ROOT, edit_in_shadow, run_parity, shadow_env

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # release cells, each in its environment's child: ./dev test --all

DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
LAYOUT = ("--dump-layout", "h2,h16,h29,h32")
FAMILIES = {"0.10.2": "0.9", "0.8.5": "0.8.5"}
LLAMA_PY = "lib/python3.11/site-packages/vllm/model_executor/models/llama.py"
DEFAULT = "        return (2, num_layers // 2, num_layers - 3)\n"


def _env(version: str):
    from parity.envs import EnvError, find_env

    try:
        return find_env("vllm", version).path
    except EnvError:
        pytest.skip(f"vllm {version}'s environment is not built")


def _check(version: str, **kw):
    return run_parity("check", "--engine", "vllm", "--vllm", version, "--target-config", str(LLAMA),
                      "--draft", str(DRAFT), *LAYOUT, "--json", **kw)


@pytest.mark.parametrize("version", FAMILIES)
def test_the_bundled_draft_is_served_the_models_default_layers(version):
    """No config key before 0.11: the runner's `load_model` sets the model's default layers
    [2, 16, 29], named h2, h16, h29 against transformers; the draft was trained on those, so the
    check is at parity, with the fallback said. The proposer shares the target's embedding (the
    checkpoint has none); the d2t offsets are read off the draft's own compute_logits."""
    _env(version)
    proc = _check(version)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    serving = result["serving"]
    assert result["verdict"] == "parity"
    assert serving["fc_input"] == ["h2", "h16", "h29"] and serving["capture_ids"] == [2, 16, 29]
    assert serving["provenance"]["family"] == FAMILIES[version] and serving["provenance"]["version"] == version
    assert serving["provenance"]["details"]["draft_class"] == "vllm.model_executor.models.llama_eagle3.Eagle3LlamaForCausalLM"
    assert serving["ids_source"] == "v1 runner: engine default" and serving["embedding"] == "target"
    assert serving["vocab"]["d2t"] == "offsets" and serving["vocab"]["t2d"] == "ignored"
    kinds = {f["kind"] for f in serving["findings"]}
    assert "default_layers_fallback" in kinds and not [f for f in serving["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("version", FAMILIES)
def test_an_edit_of_the_installed_default_layers_is_followed(version, tmp_path):
    """The model's default layers edited (in a linked copy of the release's environment) to start
    at layer 1: the served fc becomes [h1, h16, h29], a drift against the trained [h2, h16, h29],
    and no id list fixes it (these releases read none)."""
    original = _env(version)
    home = tmp_path / "home"
    home.mkdir()
    shadow = shadow_env(original, home / original.name, {LLAMA_PY: (DEFAULT, DEFAULT)})
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PARITY_NO_CACHE")}
    env.update(PARITY_HOME=str(home), PYTHONPYCACHEPREFIX=MAIN_BYTECODE)
    edit_in_shadow(shadow, LLAMA_PY, DEFAULT, DEFAULT.replace("(2,", "(1,"))
    proc = _check(version, env=env)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["verdict"] == "drift" and result["serving"]["fc_input"] == ["h1", "h16", "h29"]
    assert result["suggestion"] is None and result["unfixable"]
    assert DEFAULT in (original / LLAMA_PY).read_text()  # the original environment is untouched


def _fits_in(version: str, family: str, tmp_path) -> str:
    """The family `family`'s code-path check run in vllm `version`'s environment: 'fits' or why not."""
    import subprocess

    from parity.envs import parity_on_path
    from parity.extract.engines.vllm import python

    _env(version)
    code = (f"from parity.extract.engines.vllm.families import _fits, {family}\n"
            "try:\n"
            f"    _fits({family}); print('fits')\n"
            "except LookupError as exc:\n"
            "    print('refused:', exc)\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with parity_on_path(env) as cwd:
        out = subprocess.run([str(python(version)), "-c", code], capture_output=True, text=True, env=env, cwd=cwd)
    return out.stdout + out.stderr[-2000:]


def test_each_family_refuses_the_others_release(tmp_path):
    """A release outside every range is run by the newest family whose code paths fit: the 0.9
    family needs the loader's `initialize_model` (0.8.5's proposer builds the draft class itself),
    and the 0.8.5 family refuses a source that has it, instead of running a proposer statement
    that release no longer has."""
    for version, family in (("0.10.2", "v0_9"), ("0.8.5", "v0_8_5")):
        said = _fits_in(version, family, tmp_path)
        assert "fits" in said.splitlines(), said
    said = _fits_in("0.8.5", "v0_9", tmp_path)
    assert "refused:" in said and "initialize_model" in said, said
    said = _fits_in("0.10.2", "v0_8_5", tmp_path)
    assert ("refused: found vllm.model_executor.model_loader.utils.initialize_model, which this adapter assumes "
            "absent (the model loader's draft build") in said, said
