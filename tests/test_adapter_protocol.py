"""Release families' adapters: each family of either engine provides its engine's adapter protocol,
and no family inherits through another family's adapter or reaches into one's methods (each is
composed by concern, from parts placed ahead of its base's). No engine runs: the adapters' classes
are read, not set up."""

import ast
import importlib
import inspect
import os
import pkgutil
import shutil
import subprocess
import sys

import pytest

from parity.extract.engines.sglang import adapter as sglang_adapter
from parity.extract.engines.vllm import adapter as vllm_adapter
from parity.extract.families import families, family_borrowing, family_chain, protocol_gaps

from .helpers import ROOT

SGLANG = "parity.extract.engines.sglang.families"
VLLM = "parity.extract.engines.vllm.families"


def _sglang_base():
    return importlib.import_module(f"{SGLANG}.v0_5_23").Adapter


@pytest.mark.parametrize("module", families(SGLANG), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_sglang_family_provides_the_adapter_protocol(module):
    assert protocol_gaps(module.Adapter, sglang_adapter.Adapter) == []


CONCERNS = "parity.extract.engines.sglang.concerns"
VLLM_CONCERNS = "parity.extract.engines.vllm.concerns"


def concern_gaps(adapter: type, where: str = CONCERNS) -> list[str]:
    """Where `adapter` is not one variant of each concern (the package `where`): a concern it lists
    no variant of, or more than one; a concern of which its MRO holds more than three classes (a
    variant, at most one variant it extends, the concern's base); a parity class of no concern."""
    concerns = sorted(m.name for m in pkgutil.iter_modules(importlib.import_module(where).__path__))
    picked = sorted(base.__module__.removeprefix(where + ".") for base in adapter.__bases__)
    gaps = [] if picked == concerns else [f"picks {picked}; the concerns are {concerns}"]
    layers: dict[str, list[str]] = {}
    for cls in adapter.__mro__[1:]:
        if cls.__module__.startswith(where + "."):
            layers.setdefault(cls.__module__.removeprefix(where + "."), []).append(cls.__name__)
        elif cls.__module__.startswith("parity"):
            gaps.append(f"holds {cls.__module__}.{cls.__qualname__}, of no concern")
    gaps += [f"holds {len(names)} classes of {concern}: {names}" for concern, names in layers.items() if len(names) > 3]
    return gaps


@pytest.mark.parametrize("module", families(SGLANG), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_sglang_family_picks_one_variant_of_each_concern(module):
    assert concern_gaps(module.Adapter) == []


@pytest.mark.parametrize("module", families(VLLM), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_vllm_family_picks_one_variant_of_each_concern(module):
    assert concern_gaps(module.Adapter, VLLM_CONCERNS) == []


def test_a_family_with_a_concern_twice_or_too_deep_is_found():
    """The check fails on each injected departure: a second variant of one concern listed, a
    variant three levels below its base, a part of another family's module."""
    bases = _sglang_base().__bases__
    process = importlib.import_module(f"{CONCERNS}.process")
    twice = type("Adapter", (process.SingleProcess, *bases), {})
    deeper = type("Deeper", (process.SingleProcessWithKvCacheStandin,), {"__module__": process.__name__})
    deep = type("Adapter", (deeper, *bases[1:]), {})
    foreign = type("Part", (), {"__module__": f"{SGLANG}.v0_5_22"})
    borrowed = type("Adapter", (foreign, *bases), {})
    assert concern_gaps(twice)[0].startswith("picks ['batches', 'capture', 'config', 'context', 'draft', 'launch', "
                                             "'process', 'process', ")
    assert concern_gaps(deep) == ["holds 4 classes of process: ['Deeper', 'SingleProcessWithKvCacheStandin', "
                                  "'SingleProcess', 'Process']"]
    assert concern_gaps(borrowed)[1:] == [f"holds {SGLANG}.v0_5_22.Part, of no concern"]


def test_a_vllm_family_with_a_concern_twice_or_too_deep_is_found():
    """The vLLM check fails on each injected departure: a second variant of one concern listed, a
    variant three levels below its base, a part of another family's module (the 0.11 family's
    `Kernels`, as the families were composed before)."""
    bases = importlib.import_module(f"{VLLM}.v0_9").Adapter.__bases__
    kernels = importlib.import_module(f"{VLLM_CONCERNS}.kernels")
    twice = type("Adapter", (kernels.VllmOwnCpuExperts, *bases), {})
    deeper = type("Deeper", (kernels.SiluAndV0HeadSizes,), {"__module__": kernels.__name__})
    deep = type("Adapter", tuple(deeper if b is kernels.SiluAndV0HeadSizes else b for b in bases), {})
    foreign = type("Kernels", (), {"__module__": f"{VLLM}.v0_11"})
    borrowed = type("Adapter", (foreign, *bases), {})
    assert concern_gaps(twice, VLLM_CONCERNS)[0].startswith(
        "picks ['capture', 'config', 'draft', 'dump', 'kernels', 'kernels', ")
    assert concern_gaps(deep, VLLM_CONCERNS) == ["holds 4 classes of kernels: ['Deeper', 'SiluAndV0HeadSizes', "
                                                 "'LayerAttentionAndTorchExperts', 'Kernels']"]
    assert concern_gaps(borrowed, VLLM_CONCERNS)[1:] == [f"holds {VLLM}.v0_11.Kernels, of no concern"]


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


@pytest.mark.parametrize("module", families(VLLM), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_vllm_family_provides_the_adapter_protocol(module):
    assert protocol_gaps(module.Adapter, vllm_adapter.Adapter) == []


def test_a_vllm_adapter_lacking_a_member_or_taking_other_arguments_does_not_provide_it():
    """The vLLM check fails on an injected gap: a member dropped, a method's arguments renamed, an
    instance method where the protocol's is static, a declared attribute missing."""
    base = importlib.import_module(f"{VLLM}.v0_33").Adapter
    missing = type("Missing", (base,), {"dump_stack": None})
    renamed = type("Renamed", (base,), {"set_capture": lambda self, model, config, which: None})
    bound = type("Bound", (base,), {"target_embedding": lambda self, target: None})
    no_launch = type("NoLaunch", (), {name: getattr(base, name) for name in dir(base)
                                      if not name.startswith("_") and name != "LAUNCH"})
    assert protocol_gaps(missing, vllm_adapter.Adapter) == ["Missing has no method dump_stack"]
    assert [gap.split("(")[0] for gap in protocol_gaps(renamed, vllm_adapter.Adapter)] == ["Renamed.set_capture"]
    assert [gap.split("(")[0] for gap in protocol_gaps(bound, vllm_adapter.Adapter)] == ["Bound.target_embedding"]
    assert protocol_gaps(no_launch, vllm_adapter.Adapter) == ["NoLaunch has no LAUNCH"]


@pytest.mark.parametrize("concerns", [sglang_adapter.CONCERNS, vllm_adapter.CONCERNS], ids=["sglang", "vllm"])
def test_the_protocol_lists_each_concern_with_a_docstring_per_member(concerns):
    for concern in concerns:
        methods = {name: f for name, f in vars(concern).items() if callable(f) and not name.startswith("_")}
        assert concern.__doc__ and (methods or concern.__annotations__), concern
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


def test_a_vllm_family_chained_on_another_is_found(monkeypatch):
    """The vLLM check fails on an injected chain: the 0.9 family derived from the 0.11 family's adapter."""
    v0_9 = importlib.import_module(f"{VLLM}.v0_9")
    v0_11 = importlib.import_module(f"{VLLM}.v0_11")
    launch = importlib.import_module("parity.extract.engines.vllm.concerns.launch")
    monkeypatch.setattr(v0_9, "Adapter", type("Adapter", (launch.RunnerInitAnswerParserInUtils, v0_11.Adapter), {}))
    base = importlib.import_module(f"{VLLM}.v0_33").Adapter
    assert family_chain(VLLM, base) == [f"{VLLM}.v0_9.Adapter inherits {VLLM}.v0_11.Adapter"]


@pytest.mark.parametrize("where", [SGLANG, VLLM], ids=["sglang", "vllm"])
def test_no_family_reaches_into_another_familys_adapter(where):
    assert family_borrowing(where) == []


def test_a_family_reaching_into_another_familys_adapter_is_found(monkeypatch):
    """The check fails on each injected borrowing, as the vLLM families borrowed before they were
    composed: a member that is another family's `Adapter` method (`cpu_platform =
    v0_11.Adapter.cpu_platform`), and a call of one in a family's source (`v0_11.Adapter.set_capture(self, ...)`)."""
    v0_9 = importlib.import_module(f"{VLLM}.v0_9")

    def cpu_platform(self):  # a method of the 0.11 family's Adapter, as it held one before
        return None

    cpu_platform.__module__, cpu_platform.__qualname__ = f"{VLLM}.v0_11", "Adapter.cpu_platform"
    original = v0_9.Adapter
    monkeypatch.setattr(v0_9, "Adapter", type("Adapter", (original,), {"__module__": v0_9.__name__,
                                                                      "cpu_platform": cpu_platform}))
    assert family_borrowing(VLLM) == [f"{VLLM}.v0_9.Adapter.cpu_platform is {VLLM}.v0_11.Adapter.cpu_platform"]

    monkeypatch.setattr(v0_9, "Adapter", original)
    monkeypatch.setattr(v0_9, "v0_11", importlib.import_module(f"{VLLM}.v0_11"), raising=False)  # imported, as before
    source = inspect.getsource
    called = ("\n\ndef set_capture(self, model, vllm_config, runner):\n"
              "    v0_11.Adapter.set_capture(self, model, vllm_config, runner)\n")
    monkeypatch.setattr(inspect, "getsource", lambda obj: source(obj) + (called if obj is v0_9 else ""))
    lines = len(source(v0_9).splitlines())
    assert family_borrowing(VLLM) == [f"{VLLM}.v0_9 calls v0_11.Adapter.set_capture (line {lines + 4})"]


def _imports_torch_or_vllm(package_parent) -> list[str]:
    """Which of torch and vLLM importing every vLLM family module (as placement does, before vLLM
    picks its platform) imports, in a fresh interpreter whose parity is the one under `package_parent`."""
    code = ("import sys; from parity.extract.families import families; "
            f"families({VLLM!r}); print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=package_parent, capture_output=True,
                         text=True, timeout=120, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_the_vllm_families_import_without_torch_or_vllm(tmp_path):
    """Every vLLM family module imports neither torch nor vLLM (their imports stay in the calls); the
    check fails on an injected top-level import of a module that imports torch (parity's kernels)."""
    assert _imports_torch_or_vllm(ROOT) == []
    shutil.copytree(ROOT / "parity", tmp_path / "parity", ignore=shutil.ignore_patterns("__pycache__"))
    family = tmp_path / "parity" / "extract" / "engines" / "vllm" / "families" / "v0_22.py"
    top = "from ..concerns.capture import Capture\n"
    family.write_text(family.read_text().replace(top, "from .. import kernels  # noqa: F401\n" + top, 1))
    assert _imports_torch_or_vllm(tmp_path) == ["torch"]
