"""Shared test helpers: fixture paths, tiny draft directories, and injected drift."""

from __future__ import annotations

import json
import signal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ROOT / "fixtures" / "targets"
LLAMA = TARGETS / "llama-3.1-8b" / "config.json"
QWEN3 = TARGETS / "qwen3-8b" / "config.json"
DEEPSEEK = TARGETS / "deepseek-v3-61l" / "config.json"
QWEN2 = TARGETS / "qwen2-7b" / "config.json"
QWEN3_MOE = TARGETS / "qwen3-30b-a3b" / "config.json"
GPT_OSS = TARGETS / "gpt-oss-20b" / "config.json"

SERVING_PROBE = "parity.extract.engines.sglang.probe"
TRAINING_PROBE = "parity.extract.trainers.speculators.probe"
SPECFORGE_PROBE = "parity.extract.trainers.specforge.probe"
VLLM_PROBE = "parity.extract.engines.vllm.probe"


def ctrl_c_reaches_it() -> None:
    """A subprocess `preexec_fn`: SIGINT at its default, as a terminal's shell leaves it. A test
    run started in the background (`nohup ... &`, a CI step) hands its children SIGINT ignored,
    and Python then installs no handler: a Ctrl-C test would be killed or ignore it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def drift_overrides(*drifts: str) -> str:
    """The PARITY_PROBE_OVERRIDES value that runs each `tests.drift` module in place of the
    probe it wraps (`serving_*` the serving probe, `training_*` the training probe, `specforge_*`
    the SpecForge trainer's probe, `vllm_*` the vLLM probe)."""
    prefixes = {"serving_": SERVING_PROBE, "training_": TRAINING_PROBE, "specforge_": SPECFORGE_PROBE,
                "vllm_": VLLM_PROBE}
    entries = []
    for module in drifts:
        name = module.rsplit(".", 1)[-1]
        probe = next((p for prefix, p in prefixes.items() if name.startswith(prefix)), None)
        if probe is None:
            raise ValueError(f"{module}: a drift module's name starts with one of {sorted(prefixes)}")
        entries.append(f"{probe}={module}")
    return ",".join(entries)


def sglang_draft(tmp: Path, *, ids=None, top_level_ids=None, hidden_size=4096, vocab_size=128256,
                 **extra) -> Path:
    """A draft directory in SGLang's config format (config.json only)."""
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
           "hidden_size": hidden_size, "intermediate_size": 4 * hidden_size,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1,
           "vocab_size": vocab_size, "draft_vocab_size": 32000, "rms_norm_eps": 1e-5, **extra}
    if ids is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    if top_level_ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = top_level_ids
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(cfg))
    return tmp


def built(package: str, version: str) -> bool:
    """Whether an environment of `package` `version` is built (a test of that release skips otherwise)."""
    from parity.envs import EnvError, find_env

    try:
        find_env(package, version)
        return True
    except EnvError:
        return False
