"""Injected: the release's capture statement in ModelRunner.initialize hands the model ids (as
0.4.9's does, after reading them from the draft config), where the 0.4.8 family's hands none.

Run as `python -m tests.drift.serving_ids_handed_before_0_4_9` under SGLang 0.4.8.post1's
environment in place of the serving probe; the adapter must refuse loudly, naming the call it
found, rather than report the default layers of a release that would read the draft's ids."""

from parity.extract import standins

standins.install()

from parity.extract.engines.sglang.families.v0_4_8 import Adapter  # noqa: E402

Adapter().before_engine_imports()

from sglang.srt.model_executor.model_runner import ModelRunner  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402


def _initialize_handing_ids(self, min_per_gpu_memory: float):
    if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:
        self.model.set_eagle3_layers_to_capture([1, 15, 28])


ModelRunner.initialize = _initialize_handing_ids

if __name__ == "__main__":
    raise SystemExit(probe.main())
