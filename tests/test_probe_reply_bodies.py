"""Each probe's reply body, typed once for the child that writes it and the parent that reads it
(parity.contract.reply.TypedReply): a reply each probe really wrote (tests/replies/, recorded by
the installed engine or trainer: SGLang 0.5.23, vLLM 0.34.0, speculators 0.9.0 from the reply
cache, SpecForge 0.2.0 with SGLang 0.5.14 from its probe) validates; a key either side
misspells is refused on both sides, never read as missing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parity import reply_cache
from parity.contract.reply import ProbeReply, TypedReply, stop_from_reply
from parity.errors import InternalError
from parity.extract.engines.sglang.reply import SGLangReply
from parity.extract.engines.vllm.reply import VLLMReply
from parity.extract.trainers.specforge.reply import SpecForgeReply
from parity.extract.trainers.speculators.reply import SpeculatorsReply

from .helpers import recorded


# (model, package, recorded reply, a key its parent reads, that key misspelled)
BODIES = [
    (SGLangReply, "sglang", "sglang-0.5.23.json", "ids_source", "id_source"),
    (VLLMReply, "vllm", "vllm-0.34.0.json", "gpu_default_runner", "gpu_default_runer"),
    (SpeculatorsReply, "speculators", "speculators-0.9.0.json", "looked_for", "lookedfor"),
    (SpecForgeReply, "specforge", "specforge-0.2.0.json", "alignment", "aligment"),
]
IDS = [b[1] for b in BODIES]


@pytest.mark.parametrize("model, package, name, key, typo", BODIES, ids=IDS)
def test_a_recorded_reply_validates_and_reads_as_written(model, package, name, key, typo):
    reply = recorded(name)
    read = model.read({**reply, reply_cache.SOURCE_KEY: {"status": "hit", "key": "0" * 64}})
    assert getattr(read, key) == reply[key] or list(getattr(read, key)) == reply[key]
    assert read.release == reply["release"] and read.reply_cache["status"] == "hit"
    assert model.checked(lambda request: reply)({}) is reply  # the child sends what it wrote, unchanged


@pytest.mark.parametrize("model, package, name, key, typo", BODIES, ids=IDS)
def test_a_misspelled_key_is_refused_by_the_parent(model, package, name, key, typo):
    reply = recorded(name)
    reply[typo] = reply.pop(key)
    with pytest.raises(ValidationError, match=typo):
        model.read(reply)
    ProbeReply.read(reply)  # the untyped envelope would have read it, the key silently missing


@pytest.mark.parametrize("model, package, name, key, typo", BODIES, ids=IDS)
def test_a_misspelled_key_the_child_writes_is_parity_s_own_failure(model, package, name, key, typo):
    """The child validates before it sends: a reply its model refuses becomes parity's internal
    error (exit 3), naming the key and the release, never a reply read with the key missing."""
    reply = recorded(name)
    reply[typo] = reply.pop(key)
    sent = model.checked(lambda request: reply)({})
    assert set(sent) == {"release", "python", "error", "internal_error"} and typo in sent["internal_error"]
    stop = stop_from_reply(sent, package)
    assert isinstance(stop, InternalError) and stop.version == reply["release"]
    model.read(sent)  # what it sends instead is a reply the parent reads


@pytest.mark.parametrize("model, package, name, key, typo", BODIES, ids=IDS)
def test_a_reply_without_its_findings_and_without_an_error_is_refused(model, package, name, key, typo):
    """The invariant each body states: a reply that says nothing stopped it carries what it found."""
    reply = recorded(name)
    found = {"sglang": "slots", "vllm": "runners", "speculators": "paths", "specforge": "fc"}[package]
    del reply[found]
    if package == "speculators":
        reply["errors"] = []
    with pytest.raises(ValidationError, match="no error"):
        model.read(reply)
    model.read({**reply, "error": "stopped"})


@pytest.mark.parametrize("model", [b[0] for b in BODIES], ids=IDS)
def test_every_field_is_described_and_a_body_forbids_other_keys(model):
    assert issubclass(model, TypedReply) and model.model_config["extra"] == "forbid"
    assert all(f.description for f in model.model_fields.values())
    assert set(ProbeReply.model_fields) <= set(model.model_fields)


def test_a_wrong_type_in_a_body_is_refused():
    reply = recorded("sglang-0.5.23.json")
    reply["findings"] = [{"kind": "no_such_kind", "message": "x"}]  # a finding kind FindingKind lacks
    with pytest.raises(ValidationError):
        SGLangReply.read(reply)


# Fields whose meaning differs per probe, kept in each model (their descriptions say how)
OWN_MEANING = {"target", "capture_ids", "code_paths", "draft_unloadable"}


def test_a_field_two_bodies_share_is_declared_once():
    """`family`, `built`, `launch`, ... mean the same in every body that writes them: one
    declaration (parity.contract.reply's shared layers), never a copy that could drift apart."""
    models = [b[0] for b in BODIES]
    body = {m: set(m.model_fields) - set(ProbeReply.model_fields) for m in models}
    shared = {f for a in models for b in models if a is not b for f in body[a] & body[b]} - OWN_MEANING
    assert {"family", "release_note", "findings", "launch", "launch_refused", "built", "built_error",
            "trained_depth", "target_normed_by_trainer"} <= shared
    for field in shared:
        declared = {next(c for c in m.__mro__ if field in c.__dict__.get("__annotations__", {}))
                    for m in models if field in body[m]}
        assert len(declared) == 1 and next(iter(declared)).__module__ == "parity.contract.reply", (field, declared)
