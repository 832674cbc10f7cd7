"""The envelope of every probe's reply (parity.contract.reply.ProbeReply): typed once for the child
that writes it and the parent that reads it, with one `release` field whatever package ran."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest
from pydantic import ValidationError

from parity import reply_cache
from parity.contract.reply import ProbeReply, reply_header, stop_from_reply
from parity.errors import INTERNAL_ERROR_KEY, RELEASE_KEY, TRANSIENT_KEY, CannotExtract, InternalError
from parity.extract.child import HARNESS_LIMIT_KEY, with_limits
from parity.extract.run_until import stop_line


def test_the_keys_stdlib_modules_write_are_the_envelopes_fields():
    fields = ProbeReply.model_fields
    # the cache's own note (SOURCE_KEY) is the parent's, never the child's, yet a typed body forbids
    # any key it does not name, so the envelope names it too; CannotExtract.entry's keys likewise
    assert {RELEASE_KEY, HARNESS_LIMIT_KEY, INTERNAL_ERROR_KEY, TRANSIENT_KEY, reply_cache.SOURCE_KEY} <= set(fields)
    entry = CannotExtract.entry("sglang", "0.4.4", "no EAGLE-3", engine_lacks=True)
    assert set(entry) <= set(fields) and ProbeReply.read(entry).cannot_extract.engine_lacks
    assert all(f.description for f in fields.values())


def test_the_child_writes_the_envelope_the_parent_reads():
    header = reply_header("0.5.23", engine_release="0.5.9")
    assert header == {"release": "0.5.23", "engine_release": "0.5.9", "python": sys.executable}
    read = ProbeReply.read({**header, "findings": [], "capture_ids": [1, 2]})
    assert (read.release, read.engine_release, read.shown_release) == ("0.5.23", "0.5.9", "0.5.23")
    assert read.model_extra == {"findings": [], "capture_ids": [1, 2]}  # the probe's own keys, kept


@pytest.mark.parametrize("envelope", [{"release": 5}, {"transient": "maybe"}, {"error": ["two", "lines"]}])
def test_an_envelope_of_the_wrong_type_is_refused_on_either_side(envelope):
    with pytest.raises(ValidationError):
        ProbeReply.read(envelope)
    with pytest.raises(ValidationError):
        reply_header(**{"release": "1.0", **envelope})


def test_a_reply_in_the_old_per_package_shape_names_no_release():
    """A reply keyed `sglang_version` (the shape before the envelope) is not read as naming its
    release, and the cache's format moved with the shape: no stored reply of it is served."""
    old = {"sglang_version": "0.4.6", INTERNAL_ERROR_KEY: "AttributeError: x (at parity/extract/run_until.py:1 f)"}
    assert ProbeReply.read(old).release is None and ProbeReply.read(old).shown_release == "?"
    assert str(stop_from_reply(old, "sglang")).startswith("parity's own code failed running sglang ?:")
    assert reply_cache.FORMAT >= 3


def test_an_escaped_failure_of_parity_names_the_probed_packages_release(monkeypatch):
    from parity.extract import child

    monkeypatch.setattr(child, "faults", [])
    monkeypatch.setattr(child, "limits", [])

    def handler(request):
        stop_line(None, "attn_backend")  # parity's own attribute read failing: a failure of parity's code

    reply = with_limits(handler, "sglang")({})
    stop = stop_from_reply(reply, "sglang")
    assert reply[RELEASE_KEY] == metadata.version("sglang")
    assert isinstance(stop, InternalError) and stop.version == metadata.version("sglang")


def test_the_reply_of_an_exception_that_escaped_a_probe_reads(monkeypatch, capsys):
    """What reply_over_stdio writes when the handler raises (the traceback's last lines, a list)
    is an envelope the parent reads: it stopped vLLM 0.10's sweep as a ValidationError (exit 3)."""
    import io
    import json

    from parity.envs import reply_over_stdio

    def handler(request):
        raise KeyError("input_norm.weight")

    monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))
    reply_over_stdio(handler, hard_exit=False)
    reply = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    read = ProbeReply.read(reply)
    assert read.error == "KeyError: 'input_norm.weight'"
    assert read.traceback and read.traceback[-1] == "KeyError: 'input_norm.weight'"
