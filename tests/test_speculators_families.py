"""speculators' release families are tables: each picks one variant of every concern from
parity.extract.trainers.speculators.variants and defines no step of its own (the families that import
no other family, .importlinter's speculators-families, could otherwise grow their own copies). No
speculators runs: the family modules are read."""

from __future__ import annotations

import pytest

from parity.extract.families import families
from parity.extract.trainers.speculators import variants

FAMILIES = "parity.extract.trainers.speculators.families"
CONCERNS = ("data_paths", "train_transform", "collate", "arrow_dataset", "default_path", "draft_model",
            "dflash_preprocess")


def departures(module) -> list[str]:
    """What makes `module` more than a table: a step it defines, a concern it leaves unpicked (a release
    without DFlash picks no dflash_preprocess) or picks from elsewhere."""
    name = module.__name__.rsplit(".", 1)[-1]
    own = [f"{name} defines {n}" for n, v in vars(module).items()
           if callable(v) and getattr(v, "__module__", None) == module.__name__]
    lacks_dflash = module.RELEASES.contains("0.4.0.1")
    unpicked = [f"{name} picks no {c}" for c in CONCERNS
                if not hasattr(module, c) and not (c == "dflash_preprocess" and lacks_dflash)]
    elsewhere = [f"{name}.{c} is not a variant" for c in CONCERNS
                 if hasattr(module, c) and getattr(getattr(module, c), "__module__", None) != variants.__name__]
    return own + unpicked + elsewhere


@pytest.mark.parametrize("module", families(FAMILIES), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_speculators_family_picks_one_variant_of_each_concern(module):
    assert departures(module) == []


def test_a_family_with_a_step_of_its_own_or_a_concern_unpicked_is_found(monkeypatch):
    from parity.extract.trainers.speculators.families import v0_8, v0_9

    def collate(run, sample):
        return sample

    collate.__module__ = v0_9.__name__
    monkeypatch.setattr(v0_9, "collate", collate)
    monkeypatch.delattr(v0_8, "default_path")
    assert departures(v0_9) == ["v0_9 defines collate", "v0_9.collate is not a variant"]
    assert departures(v0_8) == ["v0_8 picks no default_path"]
