"""Injected drift: the installed DeepSeek capture adds one to every id (SGLang's DeepSeek model
adds it only when the first id is 1), so ids [0, 3, 31] capture [h1, h4, h32].

Run as `python -m tests.drift.serving_deepseek_plus_one` in place of the serving probe."""

from parity.extract import standins

standins.install()

from sglang.srt.models.deepseek_v2 import DeepseekV2ForCausalLM  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402


def _plus_one(self, layer_ids=None):
    self.capture_aux_hidden_states = True
    n = self.config.num_hidden_layers
    self.model.layers_to_capture = [2, n // 2, n - 3] if layer_ids is None else [i + 1 for i in layer_ids]


DeepseekV2ForCausalLM.set_eagle3_layers_to_capture = _plus_one

if __name__ == "__main__":
    raise SystemExit(probe.main())
