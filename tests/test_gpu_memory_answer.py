"""The GPU's memory, answered for SGLang 0.4.5.post3-0.4.6.post4's launch resolution only
(parity.extract.engines.sglang.gpu_memory), and the check that it never decides a field.

Those releases' `ServerArgs.__post_init__` computes with `get_device_memory_capacity(...)`, None
off a GPU. The launch is resolved once per card of `CARDS` with the query answered, and kept only
when every card gives the same launch: here the check itself, on resolutions that are functions of
the capacity (each way one can depend on it is refused as parity's limit, never reported), and the
query answered in the release's own function's namespace, found from the frame that failed. The
real releases: tests/test_sglang_0_4_6_launch.py."""

from __future__ import annotations

import pytest

from parity.extract.child import harness_limit
from parity.extract.engines.sglang.gpu_memory import CARDS, answering, same_on_every_card

SEED = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
BY = {"speculative_num_draft_tokens": "__post_init__"}


def test_a_launch_the_memory_decides_nothing_of_is_reported_once():
    asked = []

    def resolution(mib):
        asked.append(mib)
        return dict(SEED), dict(BY)

    assert same_on_every_card(resolution) == (SEED, BY)
    assert asked == list(CARDS.values()) and len(set(asked)) == len(asked) >= 2


def test_a_field_the_memory_decides_is_parity_s_limit_naming_it():
    """As a release whose start-up sized the batch from the card would: 48 under 25 000 MiB."""

    def resolution(mib):
        return dict(SEED, max_running_requests=48 if mib < 25_000 else 64), dict(BY)

    with pytest.raises(Exception) as info:
        same_on_every_card(resolution)
    assert type(info.value).__name__ == "StandInUsed"
    assert ("sglang's resolution of these arguments depends on the GPU's memory: max_running_requests "
            "(24 GB: 48, 80 GB: 64, 141 GB: 64)") in str(info.value)
    assert harness_limit(info.value).startswith("it relied on one of parity's CPU stand-ins")  # exit 2, never 1


def test_who_sets_a_field_counts_too():
    def resolution(mib):
        return dict(SEED), {"speculative_num_draft_tokens": "__post_init__" if mib < 90_000 else "_big_card"}

    with pytest.raises(Exception, match=r"who sets speculative_num_draft_tokens \(24 GB: __post_init__, "
                                        r"80 GB: __post_init__, 141 GB: _big_card\)"):
        same_on_every_card(resolution)


def test_resolving_on_some_cards_only_is_parity_s_limit():
    """`--page-size 4096` on 0.4.6.post4: chunked prefill 2048 under 25 000 MiB fails its assert."""

    def resolution(mib):
        chunked = 2048 if mib < 25_000 else 8192
        assert chunked % 4096 == 0
        return dict(SEED), dict(BY)

    with pytest.raises(Exception) as info:
        same_on_every_card(resolution)
    assert type(info.value).__name__ == "StandInUsed"
    assert ("whether sglang resolves these arguments depends on the GPU's memory: 24 GB: refused (AssertionError: "
            "assert (2048 % 4096) == 0); 80 GB: resolved; 141 GB: resolved") in str(info.value)


def test_the_same_refusal_on_every_card_is_the_engine_s():
    def resolution(mib):
        raise ValueError("speculative_eagle_topk must be positive")

    with pytest.raises(ValueError, match="must be positive"):
        same_on_every_card(resolution)


def test_one_refusal_whose_words_carry_a_memory_decided_number_is_still_the_engine_s():
    """Every card refusing at the same line is one refusal, though its message names a value the
    memory decided (compared by type and raising line, never by words)."""

    def resolution(mib):
        chunked = 2048 if mib < 25_000 else 8192
        raise ValueError(f"chunked_prefill_size {chunked} is not a multiple of page_size 3")

    with pytest.raises(ValueError, match="chunked_prefill_size 2048"):  # the first card's, as raised
        same_on_every_card(resolution)


def test_the_query_is_answered_in_the_release_s_own_namespace_and_put_back():
    """The frame that failed on the unanswered query gives the namespace its function looks the
    query up in; answered there, the same function computes; the release's function is restored."""
    from parity.extract import child
    from parity.extract.engines.sglang.cpu_path import memory_query_namespace

    [root] = child.package_roots("sglang")
    source = ("def __post_init__(self):\n    gpu_mem = get_device_memory_capacity(self.device)\n"
              "    self.mem_fraction_static = 0.88 if gpu_mem <= 81920 else 0.9\n")

    def unanswered(device=None):
        return None

    namespace = {"get_device_memory_capacity": unanswered}
    exec(compile(source, str(root / "srt" / "server_args.py"), "exec"), namespace)
    args = type("Args", (), {"device": "cpu"})()
    with pytest.raises(TypeError) as info:
        namespace["__post_init__"](args)
    assert memory_query_namespace(info.value) is namespace
    with answering(namespace, CARDS["141 GB"]):
        namespace["__post_init__"](args)
    assert args.mem_fraction_static == 0.9
    assert namespace["get_device_memory_capacity"] is unanswered
    assert memory_query_namespace(ValueError("gpu_mem")) is None
