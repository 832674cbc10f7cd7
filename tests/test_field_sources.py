"""Issue 32: a contract's sizes are the real configs', never a width parity shrank.

Every field of both contract kinds is either found by the run (on the tiny model, or the
trainer's marker sample) or read from the real config files (parity.contract.sources); the
guard runs one release of every engine and trainer family on the bundled fixtures and finds no
size field holding a shrunk width the real configs do not hold (tests/sizes.py). On 8075d6f
every vLLM family failed it (draft_vocab_size 32, target_vocab_size 256).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from importlib import metadata

import pytest

from parity.contract import ServingContract, TrainingContract, VocabMapping, parse_taps
from parity.extract.engines import engine
from parity.extract.shrink import TINY, shrink_draft_config
from parity.extract.trainers import trainer
from parity.inputs import read_inputs

from .helpers import LLAMA, ROOT, built
from .sizes import SIZES, leaked_sizes

DRAFTS = ROOT / "fixtures" / "drafts"
LLAMA_DRAFT = DRAFTS / "llama-3.1-8b-eagle3"  # draft_vocab_size 32000, vocab_size 128256, width 4096
SPECFORGE_DRAFT = DRAFTS / "specforge-llama3-8b-eagle3"
LAYOUT = "h2,h16,h29,h32"


# -- the one place: every field in one list --------------------------------------------------------

def test_every_contract_field_is_either_run_or_real():
    from parity.contract import sources

    paths = sources.contract_paths()
    assert not sources.REAL & sources.RUN
    assert paths == sources.REAL | sources.RUN, (sorted(paths - sources.REAL - sources.RUN),
                                                 sorted((sources.REAL | sources.RUN) - paths))
    assert set(sources.SIZES) <= sources.REAL and sources.SIZES == SIZES


def test_a_field_added_to_a_contract_must_be_placed(monkeypatch):
    """A new field in no list is caught: the partition is over the models as they are."""
    from pydantic import Field, create_model

    from parity.contract import sources

    grown = create_model("Grown", __base__=ServingContract, draft_hidden_size=(int | None, Field(default=None)))
    assert "draft_hidden_size" in sources.field_paths(grown) - sources.REAL - sources.RUN


def test_the_vocabulary_takes_its_sizes_from_the_real_reading_only():
    from parity.contract import sources

    run = {"draft_vocab_size": 32, "target_vocab_size": 256, "d2t": "offsets", "t2d": "ignored", "mapping": "m"}
    v = sources.vocab(run, {"draft_vocab_size": 32000, "target_vocab_size": 128256})
    assert v == VocabMapping(draft_vocab_size=32000, target_vocab_size=128256, d2t="offsets", t2d="ignored",
                             mapping="m")
    assert sources.vocab(run, {}).draft_vocab_size is None  # unknown, never the run's
    with pytest.raises(ValueError, match="not a size"):
        sources.vocab(run, {"d2t": "absent"})


def test_the_shrunk_draft_keeps_a_full_vocabulary_full():
    """Whether vLLM's draft class has a d2t (draft_vocab_size != the target's vocab) is measured
    on the shrunk copy: a full draft vocabulary stays the full (tiny) one, a reduced one reduced."""
    full = shrink_draft_config({"hidden_size": 4096, "vocab_size": 128256, "draft_vocab_size": 128256})
    reduced = shrink_draft_config({"hidden_size": 4096, "vocab_size": 128256, "draft_vocab_size": 32000})
    assert full["draft_vocab_size"] == full["vocab_size"] == TINY["vocab_size"]
    assert reduced["draft_vocab_size"] < reduced["vocab_size"]


# -- the guard: every family, the bundled fixtures ---------------------------------------------------

def _families(package: str) -> list[str]:
    """One release per family of `package` (a families package): its first verified release."""
    mod = importlib.import_module(package)
    return [importlib.import_module(f"{package}.{m.name}").VERIFIED[0]
            for m in pkgutil.iter_modules(mod.__path__)]


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _release(package: str, release: str) -> str | None:
    """The version argument for `release`: None where the main environment has it."""
    if _installed(package) == release:
        return None
    if not built(package, release):
        pytest.skip(f"{package} {release}'s environment is not built (./dev setup {package}-{release})")
    return release


def _configs(draft_dir):
    target, draft = read_inputs(LLAMA, draft_dir)
    return target, draft, target.config, json.loads((draft_dir / "config.json").read_text())


def _assert_real(contract, target_config, draft_config) -> None:
    assert not leaked_sizes(contract, target_config, draft_config), leaked_sizes(contract, target_config,
                                                                                 draft_config)


ENGINE_FAMILIES = [("sglang", r) for r in _families("parity.extract.engines.sglang.families")] + \
                  [("vllm", r) for r in _families("parity.extract.engines.vllm.families")]
TRAINER_FAMILIES = [("speculators", r) for r in _families("parity.extract.trainers.speculators.families")] + \
                   [("specforge", r) for r in _families("parity.extract.trainers.specforge.families")]


@pytest.mark.slow
@pytest.mark.parametrize("name, release", ENGINE_FAMILIES, ids=[f"{n}-{r}" for n, r in ENGINE_FAMILIES])
def test_no_serving_size_is_a_shrunk_width(name, release):
    version = _release(name, release)
    target, draft, target_config, draft_config = _configs(LLAMA_DRAFT)
    contract = engine(name, version).extract_serving(target, draft)
    assert isinstance(contract, ServingContract)
    _assert_real(contract, target_config, draft_config)
    assert contract.target_model.vocab_size == 128256 and contract.target_model.hidden_size == 4096
    # what each engine's draft reading takes from these files: SGLang the draft config's own
    # keys, vLLM its draft class's (draft_vocab_size) and the target's vocabulary
    assert (contract.vocab.draft_vocab_size, contract.vocab.target_vocab_size) == (32000, 128256), contract.vocab


@pytest.mark.slow
@pytest.mark.parametrize("name, release", TRAINER_FAMILIES, ids=[f"{n}-{r}" for n, r in TRAINER_FAMILIES])
def test_no_training_size_is_a_shrunk_width(name, release):
    version = _release(name, release)
    target, draft, target_config, draft_config = _configs(SPECFORGE_DRAFT if name == "specforge" else LLAMA_DRAFT)
    layout = None if name == "specforge" else parse_taps(LAYOUT)
    contract = trainer(name, version).training_contract(target, layout, draft=draft)
    assert isinstance(contract, TrainingContract)
    _assert_real(contract, target_config, draft_config)
    assert contract.vocab.draft_vocab_size == draft_config["draft_vocab_size"]
