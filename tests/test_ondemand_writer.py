"""The user's envs.toml as `--build` edits it (parity.ondemand): written with a TOML library
(tomlkit), so the user's comments, layout and other entries stay byte for byte, a line is
replaced only under its own family, and any value (a marker with quotes) is valid TOML."""

from __future__ import annotations

import tomllib

import pytest

from parity import ondemand
from parity.envs import raw_envs
from parity.home import user_envs

USERS = '''# My releases: kept by hand, and by parity --build.
#   (a comment block the user wrote)

[releases.sglang]
# pinned for the staging cluster
"0.5.3" = { transformers = "4.57.1", openai = "1.99.1" }   # do not bump
"0.5.4" = {transformers="4.57.1"}

[releases.speculators]
"0.5.3" = { transformers = "4.57.1" }  # the same version string, another family

[template.mine]   # a table of the user's own
deps = [
    "x",   # with a comment inside the array
]
'''
LINE = {"transformers": "5.19.0", "tvm_ffi": "0.1.11", "extra": ['xgrammar==0.2.1; python_version >= "3.9"']}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    return tmp_path


def test_an_added_line_keeps_the_users_comments_and_entries_byte_for_byte(home):
    user_envs().write_text(USERS)
    ondemand.add_line("sglang", "0.5.99", LINE)
    after = user_envs().read_text()
    new = [ln for ln in after.splitlines() if ln.startswith('"0.5.99"')]
    assert len(new) == 1
    assert after.replace(new[0] + "\n", "", 1) == USERS  # everything else as the user wrote it
    assert after.index(new[0]) < after.index("[releases.speculators]")  # under its own family
    assert tomllib.loads(after)["releases"]["sglang"]["0.5.99"] == LINE  # quotes in a marker: valid TOML
    assert raw_envs()["releases"]["sglang"]["0.5.99"] == LINE


def test_a_new_family_is_a_new_table_and_the_rest_stays(home):
    user_envs().write_text(USERS)
    ondemand.add_line("vllm", "0.99.0", {"transformers": "5.19.0"})
    after = user_envs().read_text()
    added = '[releases.vllm]\n"0.99.0" = {transformers = "5.19.0"}\n\n'
    assert added in after and after.replace(added, "", 1) == USERS  # a table of its own; the rest as it was
    assert tomllib.loads(after)["releases"]["vllm"] == {"0.99.0": {"transformers": "5.19.0"}}
    user_envs().write_text(USERS.split("[template.mine]")[0])  # the releases last in the file
    ondemand.add_line("vllm", "0.99.0", {"transformers": "5.19.0"})
    assert user_envs().read_text() == USERS.split("[template.mine]")[0] + added[:-1]


def test_a_replaced_line_changes_only_itself_and_only_in_its_family(home):
    user_envs().write_text(USERS)
    ondemand._replace_line("sglang", "0.5.3", {"transformers": "4.57.1", "openai": "1.99.1", "extra": ["y==2"]})
    after = user_envs().read_text()
    changed = [(a, b) for a, b in zip(USERS.splitlines(), after.splitlines()) if a != b]
    assert len(after.splitlines()) == len(USERS.splitlines()) and len(changed) == 1
    was, now = changed[0]
    assert was.startswith('"0.5.3" = { transformers') and now.endswith("# do not bump")  # its comment kept
    data = tomllib.loads(after)["releases"]
    assert data["sglang"]["0.5.3"]["extra"] == ["y==2"]
    assert data["speculators"]["0.5.3"] == {"transformers": "4.57.1"}  # the other family's same version


def test_the_first_line_makes_the_file(home):
    ondemand.add_line("sglang", "0.5.99", LINE)
    text = user_envs().read_text()
    assert text.startswith("# Releases parity built on demand (--build)")
    assert tomllib.loads(text) == {"releases": {"sglang": {"0.5.99": LINE}}}
    ondemand.add_line("sglang", "0.5.98", {"transformers": "5.19.0"})
    assert list(tomllib.loads(user_envs().read_text())["releases"]["sglang"]) == ["0.5.99", "0.5.98"]
