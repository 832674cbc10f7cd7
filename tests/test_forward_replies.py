"""The replies of `parity forward`'s sides and of the replay probe, typed once for the child that
writes them and the parent that reads them (parity.contract.reply.ForwardReply, TypedReply): a
reply each really wrote (tests/replies/: `parity forward --fixture llama-8l`'s matched case under
SGLang 0.5.23 and, with --steps 1, vLLM 0.34.0, speculators 0.9.0 the training side; the replay
probe on fixtures/replay) validates and its records read back as written, key order included (the
report prints them so); a key either side misspells, in the reply or in a variant's record, is
refused on both sides, never read as missing."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from parity.contract.reply import ForwardReply, ProbeReply, ServedForwardReply, stop_from_reply
from parity.errors import InternalError
from parity.extract.engines import engines
from parity.extract.engines.sglang.reply import SGLangForwardReply
from parity.extract.engines.vllm.reply import VLLMForwardReply
from parity.extract.trainers import trainer, trainers
from parity.extract.trainers.speculators.reply import SpeculatorsForwardReply
from parity.replay.reply import ReplayReply

from .helpers import recorded


# (model, package, recorded reply, a key of a variant's record the parent reads, that key misspelled)
FORWARD = [
    (SGLangForwardReply, "sglang", "forward-sglang-0.5.23.json", "next_token", "next_tokn"),
    (VLLMForwardReply, "vllm", "forward-vllm-0.34.0.json", "positions", "position"),
    (SpeculatorsForwardReply, "speculators", "forward-speculators-0.9.0.json", "position_ids", "positon_ids"),
]
IDS = [f[1] for f in FORWARD]


@pytest.mark.parametrize("model, package, name, key, typo", FORWARD, ids=IDS)
def test_a_recorded_forward_reply_validates_and_its_records_read_as_written(model, package, name, key, typo):
    reply = recorded(name)
    read = model.read(reply)
    assert read.release == reply["release"] and read.timings == reply["timings"]
    for case, written in reply["variants"].items():
        record = read.record(case)
        assert isinstance(record, model.record_type())
        assert getattr(record, key) == written[key]
        assert json.dumps(record.as_written()) == json.dumps(written)  # same keys, same order, same values
    assert model.checked(lambda request: reply)({}) is reply  # the child sends what it wrote, unchanged


@pytest.mark.parametrize("model, package, name, key, typo", FORWARD, ids=IDS)
def test_a_misspelled_record_key_is_refused_by_the_parent(model, package, name, key, typo):
    reply = recorded(name)
    record = reply["variants"]["matched"]
    record[typo] = record.pop(key)
    with pytest.raises(ValidationError, match=typo):
        model.read(reply)
    ProbeReply.read(reply)  # the untyped envelope would have read it, the key silently missing


@pytest.mark.parametrize("model, package, name, key, typo", FORWARD, ids=IDS)
def test_a_misspelled_key_the_forward_side_writes_is_parity_s_own_failure(model, package, name, key, typo):
    reply = recorded(name)
    reply["timing"] = reply.pop("timings")
    sent = model.checked(lambda request: reply)({})
    assert set(sent) == {"release", "python", "error", "internal_error"} and "timing" in sent["internal_error"]
    stop = stop_from_reply(sent, package)
    assert isinstance(stop, InternalError) and stop.version == reply["release"]
    model.read(sent)  # what it sends instead is a reply the parent reads


@pytest.mark.parametrize("model, package, name, key, typo", FORWARD, ids=IDS)
def test_a_forward_reply_without_its_records_and_without_an_error_is_refused(model, package, name, key, typo):
    reply = recorded(name)
    del reply["variants"]
    with pytest.raises(ValidationError, match="no error"):
        model.read(reply)
    stopped = model.read({**reply, "error": "stopped"})
    assert stopped.record("matched").error == "stopped"  # a record missing says why, as its own type
    assert isinstance(stopped.record("matched"), model.record_type())
    assert model.read({**reply, "variants": {}}).record("matched").error == "no reply"


def test_a_record_keeps_the_order_its_child_wrote():
    """An unservable draft: the serving side stops after some keys and adds `unservable` last,
    wherever the record's model declares it."""
    written = {"device": "cpu", "unservable": "cannot load", "solved_ids": [1, 2]}
    record = SGLangForwardReply.record_type().model_validate(written)
    assert list(record.as_written()) == ["device", "unservable", "solved_ids"]


def test_each_side_names_its_forward_reply():
    named = {e.name: e.FORWARD_REPLY for e in engines()}
    assert named["sglang"] is SGLangForwardReply and named["vllm"] is VLLMForwardReply
    assert all(issubclass(e.FORWARD_REPLY, ServedForwardReply) for e in engines())
    assert trainer().FORWARD_REPLY is SpeculatorsForwardReply
    assert all(issubclass(t.FORWARD_REPLY, ForwardReply) for t in trainers())


# -- the replay probe -------------------------------------------------------------------------


def test_a_recorded_replay_reply_validates_and_reads_as_written():
    reply = recorded("replay-speculators-0.9.0.json")
    read = ReplayReply.read(reply)
    assert read.samples == reply["samples"] and [s.slots for s in read.scores] == [s["slots"] for s in reply["scores"]]
    assert [s.full_acc for s in read.scores] == [s["full_acc"] for s in reply["scores"]]
    assert ReplayReply.checked(lambda request: reply)({}) is reply


@pytest.mark.parametrize("where", ["reply", "score"])
def test_a_misspelled_replay_key_is_refused_by_the_parent_and_sent_as_internal_error(where):
    reply = recorded("replay-speculators-0.9.0.json")
    if where == "reply":
        reply["sample"] = reply.pop("samples")
        typo = "sample"
    else:
        reply["scores"][0]["full_accuracy"] = reply["scores"][0].pop("full_acc")
        typo = "full_accuracy"
    with pytest.raises(ValidationError, match=typo):
        ReplayReply.read(reply)
    sent = ReplayReply.checked(lambda request: reply)({})
    assert typo in sent["internal_error"]
    assert isinstance(stop_from_reply(sent, "speculators"), InternalError)


def test_a_replay_reply_without_scores_or_with_a_short_score_is_refused():
    reply = recorded("replay-speculators-0.9.0.json")
    scores = reply.pop("scores")
    with pytest.raises(ValidationError, match="no error"):
        ReplayReply.read(reply)
    ReplayReply.read({**reply, "error": "stopped"})
    scores[0]["cond_acc"] = scores[0]["cond_acc"][:-1]
    with pytest.raises(ValidationError, match="one figure per step"):
        ReplayReply.read({**reply, "scores": scores})
