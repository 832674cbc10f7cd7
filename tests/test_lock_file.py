"""A lock file's format (parity.lock.Lock): the dump layout is held as taps and travels as the
same canonical short names, so the committed locks read and write back byte for byte."""

from __future__ import annotations

import json

import pytest

from parity.contract import Tap
from parity.inputs import InputError
from parity.lock import Lock, read_lock

from .helpers import ROOT

LOCKS = sorted((ROOT / "contracts").glob("*.json"))


@pytest.mark.parametrize("path", LOCKS, ids=[p.stem for p in LOCKS])
def test_a_committed_lock_reads_its_layout_as_taps_and_writes_it_back_byte_for_byte(path, tmp_path):
    text = path.read_text()
    held = json.loads(text)
    lock = read_lock(path)
    assert all(isinstance(t, Tap) for t in lock.dump_layout)
    assert [t.name for t in lock.dump_layout] == held["dump_layout"]
    written = lock.model_dump_json(indent=2) + "\n"
    # The file predates the trainer fields: they are added with their defaults; everything the
    # file holds is written back exactly as it was.
    again = json.loads(written)
    assert set(again) - set(held) <= {"trainer", "trainer_release", "trainer_ids"}
    assert {k: v for k, v in again.items() if k in held} == held
    if set(again) == set(held):  # a lock written by this parity: byte for byte
        assert written == text
    # A lock in the current format reads and writes byte-identically.
    current = tmp_path / path.name
    current.write_text(written)
    assert Lock.model_validate_json(current.read_text()).model_dump_json(indent=2) + "\n" == written


def test_a_layout_slot_that_is_no_tap_names_the_slot():
    data = json.loads(LOCKS[0].read_text())
    data["dump_layout"] = ["h0", "hx", "h31"]
    with pytest.raises(ValueError, match=r"dump_layout\.1[\s\S]*not a hidden-state name: 'hx'"):
        Lock.model_validate(data)
    data["dump_layout"] = ["h0"]
    with pytest.raises(ValueError, match="at least 2"):
        Lock.model_validate(data)


def test_a_bad_layout_in_a_lock_file_is_one_input_error(tmp_path):
    data = json.loads(LOCKS[0].read_text())
    data["dump_layout"] = ["h0", "h0.delta"]
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="not a lock this parity can check: .*h0.delta"):
        read_lock(path)
