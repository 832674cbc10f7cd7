"""Injected drift: the installed Llama capture forgets SGLang's +1 (captures hk instead of h(k+1)).

Run as `python -m tests.drift.serving_no_plus_one` in place of the serving probe."""

from parity.extract import standins

standins.install()

from sglang.srt.models.llama import LlamaForCausalLM  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402


def _no_plus_one(self, layer_ids=None):
    self.capture_aux_hidden_states = True
    n = self.config.num_hidden_layers
    self.model.layers_to_capture = [2, n // 2, n - 3] if layer_ids is None else list(layer_ids)


LlamaForCausalLM.set_eagle3_layers_to_capture = _no_plus_one

if __name__ == "__main__":
    raise SystemExit(probe.main())
