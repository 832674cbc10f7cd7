"""Every engine and trainer parity has (each folder under parity/extract/engines and trainers/)
conforms to what the rest of parity relies on, checked by one test run over all of them, not by a
test written per side: its names and flags, its release families (each release it verifies run by
exactly one family, and built by an environment of envs.toml), the modules it runs in children,
its typed replies, and its command-line options read back as given. No engine or trainer runs."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect

import pytest
from packaging.version import Version

from parity.contract.reply import TypedReply
from parity.envs import environments
from parity.extract import engines, trainers
from parity.extract.families import families
from parity.extract.installed import distribution

SIDES = [("engine", name) for name in engines.names()] + [("trainer", name) for name in trainers.names()]
IDS = [name for _, name in SIDES]


def impl(kind: str, name: str):
    return (engines.engine(name) if kind == "engine" else trainers.trainer(name)).impl


def package(module) -> str:
    return module.__name__


@pytest.mark.parametrize("kind, name", SIDES, ids=IDS)
def test_its_names_and_flags_are_its_own(kind, name):
    side = impl(kind, name)
    assert side.NAME == name and side.FLAG == f"--{name}"
    assert distribution(side), f"{name} declares no DIST: the distribution whose release it runs"
    convention = getattr(side, "CONVENTION", None)
    assert convention is None or convention.name == name
    if kind == "trainer" and side.CAPTURES_STATES:
        assert side.IDS_FLAG == f"--{name}-ids" and {side.IDS_FLAG, side.FLAG} <= set(side.OWN_FLAGS)
        assert all(flag == side.FLAG or flag.startswith(f"{side.FLAG}-") for flag in side.OWN_FLAGS), side.OWN_FLAGS


@pytest.mark.parametrize("kind, name", SIDES, ids=IDS)
def test_each_release_it_verifies_is_run_by_one_family_and_has_an_environment(kind, name):
    """The families' ranges do not overlap on any release parity verifies or declares an
    environment for, and each verified release is built by an environment of envs.toml."""
    side = impl(kind, name)
    mods = families(f"{package(side)}.families")
    assert mods, f"{name} has no release family"
    dist = distribution(side)
    declared = {e.packages[dist] for e in environments() if dist in e.packages}
    verified = {v for m in mods for v in getattr(m, "VERIFIED", ())}
    for release in sorted(verified | declared, key=Version):
        holders = [m.__name__.rsplit(".", 1)[-1] for m in mods if m.RELEASES.contains(release, prereleases=True)]
        assert len(holders) <= 1, f"{name} {release} is in the range of {holders}: family ranges overlap"
    for m in mods:
        assert all(m.RELEASES.contains(v, prereleases=True) for v in getattr(m, "VERIFIED", ())), m.__name__
    assert verified <= declared, f"{name} verifies {sorted(verified - declared)} with no environment in envs.toml"


def _lowest_releases(releases) -> list[str]:
    """The lowest release of each lower bound a family's RELEASES names (`>=X`, `~=X`; `==X.*`
    starts at X.dev0, `==X` is X): ranges are intervals, so two that overlap both hold the
    higher of their lowest releases."""
    lowest = []
    for spec in releases:
        assert spec.operator in (">=", "~=", "==", "<", "!="), f"{releases}: {spec} is not a bound the check reads"
        if spec.operator in (">=", "~="):
            lowest.append(spec.version)
        elif spec.operator == "==":
            lowest.append(spec.version[:-2] + ".dev0" if spec.version.endswith(".*") else spec.version)
    return lowest


@pytest.mark.parametrize("kind, name", SIDES, ids=IDS)
def test_no_two_of_its_families_ranges_overlap(kind, name):
    """Not only on the releases parity knows: each family's range has a lowest release, which it
    alone holds (two overlapping ranges would both hold the higher of their lowest releases)."""
    mods = families(f"{package(impl(kind, name))}.families")
    for m in mods:
        lowest = _lowest_releases(m.RELEASES)
        assert lowest, f"{m.__name__}: RELEASES {m.RELEASES} names no lowest release"
        for release in lowest:
            holders = [h.__name__.rsplit(".", 1)[-1] for h in mods if h.RELEASES.contains(release, prereleases=True)]
            assert holders == [m.__name__.rsplit(".", 1)[-1]], \
                f"{name} {release} (the lowest release of {m.__name__}: {m.RELEASES}) is in the range of {holders}"


@pytest.mark.parametrize("kind, name", SIDES, ids=IDS)
def test_the_modules_it_runs_in_children_exist_and_answer(kind, name):
    side = impl(kind, name)
    for module in (getattr(side, "PROBE_MODULE", None) or side.PROBE, side.FORWARD_MODULE):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, f"{name}: no module {module}"
        source = open(spec.origin).read()
        assert "def main(" in source and '__name__ == "__main__"' in source, f"{module} cannot be run as a child"
    assert issubclass(side.FORWARD_REPLY, TypedReply) or side.FORWARD_REPLY.__name__ == "ForwardReply"


@pytest.mark.parametrize("kind, name", SIDES, ids=IDS)
def test_its_replies_are_typed_described_and_closed(kind, name):
    """Its reply module's models: every field described, no other key accepted."""
    reply = importlib.import_module(f"{package(impl(kind, name))}.reply")
    models = [cls for _, cls in inspect.getmembers(reply, inspect.isclass)
              if issubclass(cls, TypedReply) and cls.__module__ == reply.__name__]
    assert models, f"{name} has no typed reply"
    for model in models:
        assert model.model_config["extra"] == "forbid", model
        assert all(field.description for field in model.model_fields.values()), model


def _parsed(side, command: str, argv: list[str]):
    """`argv` parsed by a parser holding `side`'s options for `command`; None where it takes none."""
    parser = argparse.ArgumentParser()
    side.add_options(parser, command)
    if not any(side.FLAG in action.option_strings for action in parser._actions):  # noqa: SLF001
        return None
    return parser.parse_args(argv)


@pytest.mark.parametrize("kind, name", SIDES, ids=IDS)
def test_its_options_read_back_as_given(kind, name):
    """Wherever it adds its release flag, the release reads back as given; a trainer's run ids too."""
    side = impl(kind, name)
    commands = (trainers if kind == "trainer" else engines).COMMANDS
    ids = getattr(side, "IDS_FLAG", None)
    read = {}
    for command in commands:
        args = _parsed(side, command, [side.FLAG, "all" if command == "sweep" else "1.2.3"]
                       + ([ids, "3,1,2"] if ids and command == "trainer" else []))
        if args is not None:
            read[command] = side.release_from(args)
            if ids and command == "trainer":
                assert side.ids_from(args) == [3, 1, 2]
    assert read and all(v == ("all" if c == "sweep" else "1.2.3") for c, v in read.items()), read
    assert ("sweep" in read) == (getattr(side, "SWEEP_FROM", None) is not None), read


def test_a_side_that_does_not_conform_fails_the_check_it_breaks(monkeypatch):
    """Each check fails on an injected departure (one at a time, each undone before the next)."""
    from packaging.specifiers import SpecifierSet
    from pydantic import Field

    modelopt = impl("trainer", "modelopt")
    module = importlib.import_module
    undescribed = type("Undescribed", (TypedReply,), {"__module__": "parity.extract.trainers.modelopt.reply",
                                                      "__annotations__": {"x": int}, "x": Field(default=0)})
    checks = [
        (lambda mp: mp.setattr(modelopt, "FLAG", "--model-opt"), test_its_names_and_flags_are_its_own,
         ("trainer", "modelopt")),
        (lambda mp: mp.setattr(module("parity.extract.trainers.speculators.families.v0_9"), "RELEASES",
                               SpecifierSet(">=0.8")),
         test_each_release_it_verifies_is_run_by_one_family_and_has_an_environment, ("trainer", "speculators")),
        (lambda mp: mp.setattr(module("parity.extract.engines.sglang.families.v0_5_16"), "RELEASES",
                               SpecifierSet(">=0.5.16,<0.5.21.dev1")),  # overlaps on 0.5.21.dev0 alone
         test_no_two_of_its_families_ranges_overlap, ("engine", "sglang")),
        (lambda mp: mp.setattr(module("parity.extract.trainers.modelopt.families.v0_44"), "VERIFIED",
                               ("0.44.0", "0.47.0", "0.47.9")),
         test_each_release_it_verifies_is_run_by_one_family_and_has_an_environment, ("trainer", "modelopt")),
        (lambda mp: mp.setattr(modelopt, "FORWARD_MODULE", "parity.extract.trainers.modelopt.nowhere"),
         test_the_modules_it_runs_in_children_exist_and_answer, ("trainer", "modelopt")),
        (lambda mp: mp.setattr(module("parity.extract.trainers.modelopt.reply"), "Undescribed", undescribed,
                               raising=False),
         test_its_replies_are_typed_described_and_closed, ("trainer", "modelopt")),
        (lambda mp: mp.setattr(modelopt, "release_from", lambda args: None),
         test_its_options_read_back_as_given, ("trainer", "modelopt")),
    ]
    for inject, check, args in checks:
        check(*args)  # conforms as shipped
        with monkeypatch.context() as mp:
            inject(mp)
            with pytest.raises(AssertionError):
                check(*args)
