"""envs.toml: one line per release expands into a full environment spec."""

from __future__ import annotations

import pytest

from parity.envs import EnvError, environments, load_specs

TOML = """
[releases.speculators]
"0.8.0" = { transformers = "5.16.0", extra = ["numpy<=2.5"] }

[template.speculators]
path = ".envs/speculators-{version}"
torch = "2.13.0"
no_deps = ["speculators=={version}"]
deps = ["transformers=={transformers}", "pydantic"]
"""


def test_one_line_adds_a_release():
    spec = load_specs(TOML)["speculators-0.8.0"]
    assert spec == {"path": ".envs/speculators-0.8.0", "torch": "2.13.0",
                    "no_deps": ["speculators==0.8.0"],
                    "deps": ["transformers==5.16.0", "pydantic", "numpy<=2.5"]}


def test_a_missing_pin_is_named():
    with pytest.raises(EnvError, match="lacks the pin 'transformers'"):
        load_specs(TOML.replace('transformers = "5.16.0", ', ""))


def test_the_shipped_file_names_every_release_once():
    pins = [(e.name, e.packages.get("sglang") or e.packages.get("speculators")) for e in environments()]
    assert ("main", "0.5.23") in pins and ("speculators-0.7.0.2", "0.7.0.2") in pins
    assert ("sglang-0.5.14", "0.5.14") in pins and ("sglang-0.5.12.post1", "0.5.12.post1") in pins
