"""Release families' adapters: each SGLang family provides its adapter protocol, and no family of
either engine inherits through another family's adapter (each is composed by concern, from parts
placed ahead of its base's). No engine runs: the adapters' classes are read, not set up."""

import importlib

import pytest

from parity.extract.engines.sglang import adapter as sglang_adapter
from parity.extract.families import families, family_chain, protocol_gaps

SGLANG = "parity.extract.engines.sglang.families"
VLLM = "parity.extract.engines.vllm.families"


def _sglang_base():
    return importlib.import_module(f"{SGLANG}.v0_5_23").Adapter


@pytest.mark.parametrize("module", families(SGLANG), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_sglang_family_provides_the_adapter_protocol(module):
    assert protocol_gaps(module.Adapter, sglang_adapter.Adapter) == []


def test_an_adapter_lacking_a_member_or_taking_other_arguments_does_not_provide_it():
    base = _sglang_base()
    missing = type("Missing", (base,), {"draft_layers": None})  # a concern part that dropped it
    renamed = type("Renamed", (base,), {"resolve_aux_ids": lambda self, config: (False, None)})
    no_family = type("NoFamily", (), {name: getattr(base, name) for name in dir(base)
                                      if not name.startswith("_") and name != "family"})
    assert protocol_gaps(missing, sglang_adapter.Adapter) == ["Missing has no method draft_layers"]
    assert [gap.split("(")[0] for gap in protocol_gaps(renamed, sglang_adapter.Adapter)] == \
        ["Renamed.resolve_aux_ids"]
    assert protocol_gaps(no_family, sglang_adapter.Adapter) == ["NoFamily has no family"]


def test_the_protocol_lists_each_concern_with_a_docstring_per_member():
    for concern in sglang_adapter.CONCERNS:
        methods = {name: f for name, f in vars(concern).items() if callable(f) and not name.startswith("_")}
        assert concern.__doc__ and methods, concern
        assert all(f.__doc__ for f in methods.values()), concern


@pytest.mark.parametrize("where, base", [(SGLANG, "v0_5_23"), (VLLM, "v0_33")], ids=["sglang", "vllm"])
def test_no_family_inherits_through_another_familys_adapter(where, base):
    assert family_chain(where, importlib.import_module(f"{where}.{base}").Adapter) == []


def test_a_family_chained_on_another_is_found(monkeypatch):
    """The check fails on an injected chain: the 0.5.21 family derived from the 0.5.22 family's
    adapter, as before the families were composed by concern."""
    v0_5_21 = importlib.import_module(f"{SGLANG}.v0_5_21")
    v0_5_22 = importlib.import_module(f"{SGLANG}.v0_5_22")
    chained = type("Adapter", (v0_5_22.Adapter,), {"family": "0.5.21"})
    monkeypatch.setattr(v0_5_21, "Adapter", chained)
    assert family_chain(SGLANG, _sglang_base()) == [f"{SGLANG}.v0_5_21.Adapter inherits {SGLANG}.v0_5_22.Adapter"]
