"""The training-side extractor, against the real installed speculators (0.9.0 down to 0.3.0), no mocks.

Every contract here comes from running speculators' own data path on a marked sample
in a subprocess of that release's environment. The probes are started together, up
front, so the file stays fast on two cores (each probe is ~6 s, almost all import).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from parity.contract import TargetModel, Tap, diff, parse_taps
from parity.conventions import CONVENTIONS
from parity.envs import run_module
from parity.extract.trainers.speculators import (PROBE_MODULE, PROBE_SHAPE, DraftError, TrainingExtractionError,
                                                 contract_from_probe, extract_training, probe_python,
                                                 probe_training, read_draft)
from parity.extract.trainers.draft import classify_d2t, installed_schema

from .helpers import EXHAUSTIVE

# A session fixture runs every speculators probe; most tests run one. One worker runs the file:
# on two, each ran the fixture (the second waiting on the first's children: 43 s of a core idle).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_training_extractor")]

ROOT = Path(__file__).resolve().parent.parent
DRIFTED = "tests.drift.training_slice_from_one"
V1_DRIFTED = "tests.drift.training_v1_slice_from_one"  # standardize_data_v1 feeds hidden_states[1:]
ARROW = "speculators.train.data.ArrowDataset._get_raw_data"
V1 = "speculators.train.data.standardize_data_v1"

DEEPSEEK = TargetModel(architecture="DeepseekV3ForCausalLM", model_type="deepseek_v3",
                       num_hidden_layers=61, hidden_size=7168, vocab_size=129280)
LLAMA = TargetModel(architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=32,
                    hidden_size=4096, vocab_size=128256)
BORN_FROM = parse_taps("h0,h3,h31,h59")


PROBES = [(4, "0.9.0", PROBE_MODULE), (4, "0.7.0.2", PROBE_MODULE), (4, "0.6.0.2", PROBE_MODULE),
          (4, "0.5.0", PROBE_MODULE), (4, "0.4.0.1", PROBE_MODULE), (4, "0.3.0", PROBE_MODULE),
          (4, "0.9.0", DRIFTED), (4, "0.5.0", V1_DRIFTED), (4, "0.4.0.1", V1_DRIFTED), (4, "0.3.0", V1_DRIFTED),
          (1, "0.9.0", PROBE_MODULE)]
EXHAUSTIVE_ONLY = ("0.6.0.2", "0.7.0.2", "0.4.0.1")  # releases the suite runs through another of their family
V1_ONLY = {"0.4.0.1", "0.3.0"}  # no arrow directory before 0.5: the v1 sample is the default, the only path
NOT_NORMED = {"0.3.0"}  # its Eagle3DraftModel has no verifier_norm: the LM head gets the target as is


@pytest.fixture(scope="session", autouse=True)
def warm_probes():
    """Every probe this file needs, concurrently (2 cores: ~2x faster than one by one), into the
    reply cache (parity.reply_cache; under pytest-xdist one worker runs each probe and the
    others wait for its reply), and the in-process import of this interpreter's speculators
    config class. The drifted probe is run by its own name: the key the override reaches."""
    # Outside `./dev test --all` only the suite's releases (tests/conftest.py deselects the rest:
    # 0.6 and 0.7 are each run by exhaustive tests only here, 0.4.0.1 is the 0.3 family's second).
    probes = PROBES if EXHAUSTIVE else [(n, v, m) for n, v, m in PROBES if v not in EXHAUSTIVE_ONLY]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(run_module, probe_python(v), m, {"num_slots": n, **PROBE_SHAPE}, cache=True)
                   for n, v, m in probes]
        futures.append(pool.submit(installed_schema))
        for future in futures:
            future.result()


def kinds(contract) -> list[str]:
    return [f.kind for f in contract.findings]


# -- the case parity was born from ----------------------------------------------------------------


_EVERY = pytest.mark.exhaustive  # each release's data paths: ./dev test --all; the suite runs the newest and oldest


@pytest.mark.parametrize("version,data_path", [
    ("0.9.0", None), pytest.param("0.7.0.2", "standardize_data_v1", marks=_EVERY),
    pytest.param("0.7.0.2", "ArrowDataset", marks=_EVERY),
    pytest.param("0.6.0.2", "standardize_data_v1", marks=_EVERY),  # its dataset reads the file itself
    pytest.param("0.6.0.2", "ArrowDataset", marks=_EVERY),
    pytest.param("0.5.0", "standardize_data_v1", marks=_EVERY),  # 0.6's paths, its own collate and split
    pytest.param("0.5.0", "ArrowDataset", marks=_EVERY),
    pytest.param("0.4.0.1", None, marks=_EVERY), ("0.3.0", None),  # the v1 sample only, through Eagle3SampleFileDataset
])
def test_born_from_case(version, data_path):
    """4-slot dump [h0, h3, h31, h59] of a 61-layer DeepSeek-V3: fc [h0, h3, h31], target h59."""
    c = extract_training(DEEPSEEK, BORN_FROM, speculators_version=version, data_path=data_path)
    assert [t.name for t in c.fc_input] == ["h0", "h3", "h31"]
    assert c.target == Tap.parse("h59")
    assert (c.fc_slots, c.target_slot) == ((0, 1, 2), 3)
    assert c.dump_layout_source == "manifest"
    assert "target_not_final_layer" in kinds(c)
    assert "h59" in next(f.message for f in c.findings if f.kind == "target_not_final_layer")
    assert c.provenance.version == version
    assert c.provenance.code_path == (V1 if data_path == "standardize_data_v1" or version in V1_ONLY else ARROW)
    assert c.target_normed_by_trainer is (version not in NOT_NORMED)
    assert c.alignment.startswith("row t pairs input_ids[t+1] with hidden_states[t] and "
                                  "verifier_last_hidden_states[t+1]")
    assert "data_paths_disagree" not in kinds(c)


def test_fp8_transfer_of_0_9_keeps_slots_and_is_lossy():
    reply = probe_training(4, "0.9.0")
    fp8 = [p for p in reply["paths"] if p.get("backend") == "fp8"]
    assert len(fp8) == 1 and not fp8[0]["default"]
    assert (fp8[0]["fc_slots"], fp8[0]["target_slot"]) == ([0, 1, 2], 3)
    assert fp8[0]["lossy"] and fp8[0]["markers_exact"]  # FP8 loses ordinary values, not the markers
    assert reply["default_path"] == ARROW


def test_0_7_default_path_and_noise():
    reply = probe_training(4, "0.7.0.2")
    assert reply["default_path"] == ARROW
    assert {p["code_path"] for p in reply["paths"]} == {ARROW, V1}
    assert all("AddUniformNoise" in p["lossy_reason"] for p in reply["paths"])


# -- default data generation ----------------------------------------------------------------------


def test_default_llama_datagen_ids():
    """speculators 0.9 data generation on a 32-layer Llama: ids [2, 16, 29] + the appended 32."""
    c = extract_training(LLAMA, datagen_ids=[2, 16, 29], datagen_convention=CONVENTIONS["speculators-datagen"],
                         speculators_version="0.9.0")
    assert c.dump_layout_source == "datagen_ids"
    assert [t.name for t in c.dump_layout] == ["h2", "h16", "h29", "h32"]
    assert [t.name for t in c.fc_input] == ["h2", "h16", "h29"]
    assert c.target == Tap.stream(32)
    assert "target_not_final_layer" not in kinds(c)
    assert "dump_width_mismatch" not in kinds(c)


def test_unsorted_datagen_ids_are_noticed():
    c = extract_training(LLAMA, datagen_ids=[16, 2, 29], datagen_convention=CONVENTIONS["speculators-datagen"],
                         speculators_version="0.9.0")
    assert [t.name for t in c.fc_input] == ["h2", "h16", "h29"]
    assert "ids_not_ascending" in kinds(c)


# -- drift -----------------------------------------------------------------------------------------


def test_drifted_data_path_changes_the_contract(inject_drift):
    """A speculators whose arrow path feeds hs[:, 1:] is caught by running it, not by a rule."""
    before = extract_training(DEEPSEEK, BORN_FROM, speculators_version="0.9.0")
    inject_drift(DRIFTED)
    after = extract_training(DEEPSEEK, BORN_FROM, speculators_version="0.9.0")
    assert [t.name for t in after.fc_input] == ["h3", "h31", "h59"]
    d = diff(before, after)
    assert not d.empty
    assert [(s.slot, s.expected.name, s.actual.name) for s in d.mismatched_slots] == [
        (0, "h0", "h3"), (1, "h3", "h31"), (2, "h31", "h59")]
    assert [s.why for s in d.mismatched_slots] == [
        "order differs: h3 is slot 1 on the other side",
        "order differs: h31 is slot 2 on the other side", "different layer (+28)"]
    assert any(f.field == "fc_slots" and f.actual == [1, 2, 3] for f in d.fields)


@pytest.mark.parametrize("version,data_path", [("0.3.0", None), pytest.param("0.4.0.1", None, marks=_EVERY),
                                               ("0.5.0", "standardize_data_v1")])
def test_drifted_v1_data_path_changes_the_contract(inject_drift, version, data_path):
    """A speculators whose standardize_data_v1 feeds hidden_states[1:] is caught by running it (0.3 and
    0.5 families: the v1 sample is the 0.3 family's only path, 0.5's arrow path then disagrees with it)."""
    before = extract_training(DEEPSEEK, BORN_FROM, speculators_version=version, data_path=data_path)
    inject_drift(V1_DRIFTED)
    after = extract_training(DEEPSEEK, BORN_FROM, speculators_version=version, data_path=data_path)
    assert [t.name for t in before.fc_input] == ["h0", "h3", "h31"]
    assert [t.name for t in after.fc_input] == ["h3", "h31", "h59"]
    assert after.provenance.code_path == V1
    d = diff(before, after)
    assert not d.empty
    assert any(f.field == "fc_slots" and f.actual == [1, 2, 3] for f in d.fields)
    assert ("data_paths_disagree" in kinds(after)) is (data_path is not None)


# -- bad inputs ------------------------------------------------------------------------------------


def test_layout_too_short_for_the_data_path():
    with pytest.raises(TrainingExtractionError) as err:
        extract_training(DEEPSEEK, parse_taps("h59"), speculators_version="0.9.0")
    assert "1-slot" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs", [
    {"dump_layout": parse_taps("h0,h3,h62")},
    {"datagen_ids": [2, 30, 70], "datagen_convention": CONVENTIONS["speculators-datagen"]},
    {},
])
def test_bad_layouts_raise_one_line(kwargs):
    with pytest.raises(TrainingExtractionError) as err:
        extract_training(DEEPSEEK, speculators_version="0.9.0", **kwargs)
    assert "\n" not in str(err.value)


# -- draft directories -----------------------------------------------------------------------------


def speculators_config(**overrides) -> dict:
    config = {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0", "draft_vocab_size": 8, "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
        "norm_before_fc": True, "norm_output": True, "norm_before_residual": False,
        "transformer_layer_config": {"model_type": "llama", "hidden_size": 16, "vocab_size": 32},
        "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                               "proposal_methods": [{"proposal_type": "greedy"}],
                               "verifier": {"name_or_path": None, "architectures": []}},
    }
    config.update(overrides)
    return config


def make_draft(tmp_path: Path, config: dict | str, tensors: dict | None = None) -> Path:
    d = tmp_path / "draft"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if tensors is not None:
        save_file(tensors, str(d / "model.safetensors"))
    return d


def speculators_vocab_maps():
    """d2t/t2d built by speculators' own builder (offsets) for an 8-of-32 draft vocab."""
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    freq = {t: 100 - t for t in (1, 3, 4, 9, 15, 20, 27, 31, 5, 6)}
    return build_vocab_mappings_from_distribution(freq, draft_vocab_size=8, target_vocab_size=32)


def schema():
    return probe_training(4, "0.9.0")["config_schema"]


def test_draft_flags_through_the_config_class(tmp_path):
    d2t, t2d = speculators_vocab_maps()
    d = make_draft(tmp_path, speculators_config(), {"d2t": d2t, "t2d": t2d,
                                                   "embed_tokens.weight": torch.zeros(32, 16)})
    draft = read_draft(d, schema=schema())
    assert draft.ids == (2, 30, 58)
    assert draft.flags.model_dump() == {"norm_before_fc": True, "fc_norm": False, "norm_output": True,
                                        "norm_before_residual": False}
    flag_default = [f for f in draft.findings if f.kind == "flag_default"]
    assert any("'fc_norm'" in f.message for f in flag_default)  # absent: the class default applies
    assert (draft.vocab.d2t, draft.vocab.t2d) == ("offsets", "present")
    assert (draft.vocab.draft_vocab_size, draft.vocab.target_vocab_size) == (8, 32)
    assert draft.has_weights and draft.has_embed_tokens
    assert draft.embedding == "target"  # embed_requires_grad defaults to False: a frozen copy
    assert "Eagle3SpeculatorConfig" in draft.config_class


def test_installed_schema_matches_the_probe():
    assert installed_schema().model_dump(mode="json", by_alias=True) == schema()


def test_d2t_absolute_vs_offsets(tmp_path):
    d2t, t2d = speculators_vocab_maps()
    absolute = torch.arange(8) + d2t
    d = make_draft(tmp_path, speculators_config(), {"d2t": absolute, "t2d": t2d})
    assert read_draft(d, schema=schema()).vocab.d2t == "absolute"
    assert classify_d2t(d2t, None, 32)[0] == "offsets"  # repeats rule out absolute
    assert classify_d2t(torch.tensor([5, 20, 30]), None, 32)[0] == "absolute"  # offsets overflow


def test_unknown_key_and_trained_embedding(tmp_path):
    config = speculators_config(norm_befor_fc=True, embed_requires_grad=True)
    draft = read_draft(make_draft(tmp_path, config), schema=schema())
    unknown = [f for f in draft.findings if f.kind == "unknown_config_key"]
    assert len(unknown) == 1 and "norm_befor_fc" in unknown[0].message
    assert draft.embedding == "draft"
    assert not draft.has_weights and draft.vocab.d2t == "unknown"


def test_unmapped_flag_field_of_a_newer_class(tmp_path):
    newer = dict(schema())
    newer["bool_fields"] = [*newer["bool_fields"], "norm_after_fc"]
    newer["defaults"] = {**newer["defaults"], "norm_after_fc": False}
    draft = read_draft(make_draft(tmp_path, speculators_config()), schema=newer)
    assert any(f.kind == "unmapped_flag_field" and "norm_after_fc" in f.message for f in draft.findings)


@pytest.mark.parametrize("config,needle", [
    ('{"eagle_aux_hidden_state_layer_ids": [2, 30,', "malformed JSON"),
    ("[1, 2]", "expected a JSON object"),
    (speculators_config(eagle_aux_hidden_state_layer_ids="2,30,58"), "a list of integers"),
    (speculators_config(norm_before_fc="yes"), "'norm_before_fc' must be true or false"),
    (speculators_config(draft_vocab_size=0), "'draft_vocab_size' must be a positive integer"),
])
def test_bad_draft_configs_raise_one_line(tmp_path, config, needle):
    d = make_draft(tmp_path, config)
    with pytest.raises(DraftError) as err:
        read_draft(d, schema=schema())
    message = str(err.value)
    assert needle in message and "config.json" in message and "\n" not in message


def test_missing_draft_dir_and_config(tmp_path):
    with pytest.raises(DraftError, match="no such draft directory"):
        read_draft(tmp_path / "nope", schema=None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DraftError, match="config.json: missing"):
        read_draft(tmp_path / "empty", schema=None)


def test_eagle_format_fixture_reads_ids_from_eagle_config():
    draft = read_draft(ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3", schema=schema())
    assert draft.ids == (2, 30, 58) and draft.ids_key == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert "not_speculators_format" in [f.kind for f in draft.findings]


# -- the draft in the contract ---------------------------------------------------------------------


def test_draft_ids_as_layout_and_disagreement(tmp_path):
    d = make_draft(tmp_path, speculators_config())
    from_draft = extract_training(DEEPSEEK, draft_dir=d, speculators_version="0.9.0")
    assert from_draft.dump_layout_source == "draft_config"
    assert [t.name for t in from_draft.dump_layout] == ["h2", "h30", "h58", "h61"]
    assert [t.name for t in from_draft.fc_input] == ["h2", "h30", "h58"]
    assert "target_not_final_layer" not in kinds(from_draft)
    assert from_draft.graph.norm_before_fc is True and from_draft.embedding == "target"

    manifest = extract_training(DEEPSEEK, BORN_FROM, draft_dir=d, speculators_version="0.9.0")
    assert manifest.dump_layout_source == "manifest"
    assert "draft_ids_disagree" in kinds(manifest)


def test_draft_fc_width_vs_dump(tmp_path):
    d = make_draft(tmp_path, speculators_config(eagle_aux_hidden_state_layer_ids=[2, 30]))
    c = extract_training(DEEPSEEK, BORN_FROM, draft_dir=d, speculators_version="0.9.0")
    assert "dump_width_mismatch" in kinds(c)


# -- the trainer boundary and its release families --------------------------------------------------


def test_trainer_registry():
    from parity.extract.trainers import Trainer, names, trainer
    from parity.inputs import InputError

    assert names() == ["modelopt", "nemo-automodel", "specforge", "speculators"]
    t = trainer()
    assert isinstance(t.impl, Trainer) and t.name == "speculators" and t.release is None
    assert TrainingExtractionError in t.ERRORS and DraftError in t.ERRORS
    assert isinstance(trainer("specforge").impl, Trainer) and trainer("specforge").name == "specforge"
    assert trainer("speculators", "0.8.1").release == "0.8.1"
    with pytest.raises(InputError) as err:
        trainer("trtllm")
    assert "unknown trainer 'trtllm'" in str(err.value) and "\n" not in str(err.value)


def test_each_built_release_is_verified_by_exactly_one_family():
    """Every speculators release parity builds (envs.toml) runs through one family that verified it."""
    from parity.envs import environments
    from parity.extract.families import families
    from parity.extract.trainers.speculators.families import family_for

    built = {env.packages["speculators"] for env in environments() if "speculators" in env.packages}
    assert built == {"0.9.0", "0.8.1", "0.7.0.2", "0.6.0.2", "0.5.0", "0.4.0.1", "0.3.0"}
    for version in built:
        assert version in family_for(version).VERIFIED
    for module in families("parity.extract.trainers.speculators.families"):
        assert all(module.RELEASES.contains(v) for v in module.VERIFIED), module.__name__


def test_the_probe_names_the_family_it_ran():
    assert probe_training(4, "0.9.0")["family"] == "0.9"
    assert probe_training(4, "0.7.0.2")["family"] == "0.7"
    assert probe_training(4, "0.8.1")["family"] == "0.8"
    assert probe_training(4, "0.5.0")["family"] == "0.5"
    if EXHAUSTIVE:  # the family's second release: ./dev test --all
        assert probe_training(4, "0.4.0.1")["family"] == "0.3"
    assert probe_training(4, "0.3.0")["family"] == "0.3"


