"""Test-only: load a draft directory fully with SGLang's own draft class and report what loaded.

    python -m tests.sglang_load_draft  < {"draft_dir": ...}

Builds the draft through SGLang's config reader and model class (the 0.5.23 adapter),
feeds every checkpoint tensor through its `load_weights`, and compares the loaded
parameters with the checkpoint tensors they came from."""

import json
import os
import sys

import torch
from safetensors.torch import load_file

from parity.extract import standins

standins.install()

from parity.extract.child import free_port  # noqa: E402
from parity.extract.engines.sglang.runtime import adapter_for  # noqa: E402


def main() -> None:
    request = json.loads(sys.stdin.read())
    from importlib import metadata
    adapter, _, _ = adapter_for(metadata.version("sglang"))
    adapter.setup(free_port(), request["draft_dir"])
    draft = adapter.build_draft(request["draft_dir"])
    tensors = {}
    for name in sorted(os.listdir(request["draft_dir"])):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(request["draft_dir"], name)))
    draft.load_weights(list(tensors.items()))
    params = dict(draft.named_parameters())
    qkv = torch.cat([tensors[f"layers.0.self_attn.{p}_proj.weight"] for p in "qkv"])
    reply = {
        "class": type(draft).__name__,
        "fc": torch.equal(params["model.fc.weight"], tensors["fc.weight"]),
        "qkv": torch.equal(params["model.layers.0.self_attn.qkv_proj.weight"], qkv),
        # ParallelLMHead pads its rows to a multiple of 64: compare the real ones
        "lm_head": torch.equal(params["lm_head.weight"][: tensors["lm_head.weight"].shape[0]],
                               tensors["lm_head.weight"]),
        "hot_token_id": torch.equal(draft.hot_token_id,
                                    tensors["d2t"] + torch.arange(tensors["d2t"].shape[0])),
        "aux_ids": draft.config.eagle_config["eagle_aux_hidden_state_layer_ids"],
    }
    sys.stdout.write("\n" + json.dumps(reply) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
