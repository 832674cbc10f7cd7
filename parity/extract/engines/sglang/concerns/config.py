"""The config concern: how the engine reads a model's config (its ModelConfig) and a DFlash
draft's.

- `Config` (0.4.6.post3 on, as every family from 0.4.9 runs it): `ModelConfig.from_server_args`.
- `ConfigFromTpWorkerStatement` (0.4.4.post2-0.4.8): the ModelConfig is built by one statement of
  the real `TpModelWorker.__init__` (`self.model_config = ...`), run alone
  (run_until.run_assignment) with the server args naming the model's directory:
  `ModelConfig(path, trust_remote_code=..., ...)` up to 0.4.6.post2, which have no
  `ModelConfig.from_server_args`, and `ModelConfig.from_server_args(server_args, model_path=...,
  is_draft_model=...)` from 0.4.6.post3, whichever the release has.
"""

from __future__ import annotations

import copy
from typing import Any

from ....run_until import run_assignment

CONFIG_STATEMENT = "model_config"  # the statement of TpModelWorker.__init__ assigning self.model_config


class Config:
    """Model config reading: `ModelConfig.from_server_args`."""

    CONFIG_PATHS: tuple[str, ...] = ("sglang.srt.configs.model_config.ModelConfig.from_server_args",)

    def model_config(self, model_dir: str, is_draft: bool = False):
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self.server_args, model_path=model_dir,
                                            is_draft_model=is_draft)

    def draft_model_config(self, draft_dir: str, context_length: int):
        """The draft's ModelConfig as the EAGLE worker builds it: with the target's context
        length (eagle_worker_v2 passes `target ... model_config.context_len`)."""
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self.server_args, model_path=draft_dir, is_draft_model=True,
                                            context_length=context_length)

    def dflash_draft_config(self, draft_dir: str) -> Any:
        """The DFlash draft's config as the engine's parser reads it (`parse_dflash_draft_config` of
        the draft's ModelConfig: target_layer_ids, block size, mask token)."""
        from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

        return parse_dflash_draft_config(draft_hf_config=self.model_config(draft_dir, is_draft=True).hf_config)

    def dflash_written_ids(self, draft_dir: str) -> list[int] | None:
        """The DFlash draft's own ids as the engine's parser reads them (its `target_layer_ids`),
        None when it has none and the engine builds its default."""
        parsed = self.dflash_draft_config(draft_dir)
        return None if parsed.target_layer_ids is None else list(parsed.target_layer_ids)


class ConfigFromTpWorkerStatement(Config):
    """The ModelConfig built by one statement of the real `TpModelWorker.__init__`."""

    CONFIG_PATHS: tuple[str, ...] = ("sglang.srt.managers.tp_worker.TpModelWorker.__init__",)

    def model_config(self, model_dir: str, is_draft: bool = False):
        """The statement of the real `TpModelWorker.__init__` that builds its ModelConfig, run alone
        with server args naming `model_dir` (the draft's path when `is_draft`)."""
        from sglang.srt.managers.tp_worker import TpModelWorker

        args = copy.copy(self.server_args)
        if is_draft:
            args.speculative_draft_model_path = model_dir
        else:
            args.model_path = model_dir
        worker = TpModelWorker.__new__(TpModelWorker)
        run_assignment(TpModelWorker.__init__, CONFIG_STATEMENT, worker, server_args=args, is_draft_worker=is_draft)
        return worker.model_config
