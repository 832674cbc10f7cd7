"""The draft concern: the draft as the proposer builds, loads and shares it with the target, and
what its class applies (the built draft, parity.contract.BuiltDraft; docs/built-draft.md). The
draft config keys vLLM reads (BuiltDraft's config keys) are recorded while `config` reads the
served draft, `build_draft` builds its class and each runner reads its ids, the target's config
objects left out (`target_configs`); a speculators-format config.json also as the dict its
`SpeculatorsConfig` converter reads (`config_keys`).

- `Draft` (0.16-0.33): the registry's draft class built from the draft's ModelConfig with
  `initialize_model` (as V1's `EagleProposer._get_model` and V2's `load_eagle_model` build it with
  `get_model`: one build is read for both), at the target's dtype (`SpeculativeConfig` passes
  `dtype=target_model_config.dtype`), its checkpoint loaded by its own `load_weights`, then shared
  with the target by the proposer's own `_maybe_share_embeddings` / `_maybe_share_lm_head`. Every
  fact is read off the class as built (the graph flags, the d2t found by running its
  `compute_logits`), so each release is reported as it builds: 0.17.0's `Eagle3LlamaForCausalLM`
  builds none of `norm_before_fc`, `fc_norm` or `norm_output` (never read: a draft trained with
  one is a drift on the graph flag and on the key), 0.21.0's builds `norm_before_fc`, 0.22 on
  `fc_norm` and `norm_output` too; 0.22-0.27's always builds the d2t buffer (0.33: only for a draft
  vocabulary other than the target's). transformers 4.57 (0.16-0.20; 0.21: 5.24): vLLM's
  `patch_rope_parameters` copies the config class's `rope_theta` into `rope_parameters`, so a
  config that writes its rope only as `rope_parameters` is built with base 10000 (measured on
  0.16.0; as speculators' converter builds it).
- `SharedByV2LoadEagleModel` (0.34): the target's embedding and LM head are shared with the draft
  by V2's `spec_decode/eagle/utils.load_eagle_model`: `maybe_share_target_embed` and
  `share_target_lm_head(get_target_lm_head(...))`, on the target's language model.
- `SharedByLoadModelStatements` (0.11): its `EagleProposer.load_model` builds the registry's
  `Eagle3LlamaForCausalLM` with `get_model` on the draft's ModelConfig (at the target's dtype), as
  0.33's proposers do, and shares inside that method: the target's embedding whenever the shapes
  match (a draft's own embedding is dropped), the LM head for EAGLE-3 when its shape matches; those
  two statements run on a holder. That class builds one decoder layer whatever `num_hidden_layers`
  says (never read: at its default where the config sets 1, `config_keys`; 0.15.1's installed class
  builds that many), its fc a plain `torch.nn.Linear`, and none of `norm_before_fc`, `fc_norm` or
  `norm_output`; `norm_before_residual` is read. transformers 4.57: a config that writes its rope
  only as transformers 5's `rope_parameters` is built with `LlamaConfig`'s default base 10000,
  whatever it says (a trained checkpoint with another base is a rope_frequencies drift);
  `_find_dtype` reads `torch_dtype` by that name. A speculators-format config: its
  `SpeculatorsConfig` (kept in `configs/speculators/base`) is built from
  `extract_vllm_speculative_config`'s result (0.16 on: `extract_transformers_pre_trained_config`'s),
  the keys followed through it (SPECULATORS_CONVERSION). A release of this range that builds
  otherwise (0.12-0.15, placed here by their code paths) is reported as it builds.
- `SharedByFirstStatementFound` (0.9-0.10): the proposer shares the target's token embedding with
  the draft in one statement, `if get_pp_group().world_size == 1 and <draft embedding shape> ==
  <target embedding shape>:` (0.9.1 on: a draft with its own embedding of another shape keeps it),
  written on `target_language_model` (0.9.2 on) or `target_model` (0.9.1); in 0.9.0-0.9.0.1 the
  test is `get_pp_group().world_size == 1` alone: the draft's embedding is replaced whatever its
  shape. The LM head is shared only for a method other than eagle3: an EAGLE-3 draft keeps its
  own. parity runs the statements of the installed method (SHARE_EMBEDDING_TESTS,
  SHARE_HEAD_TESTS: the first found). The draft's `compute_logits` takes the proposer's
  `sampling_metadata=None` (target.logits_as_proposed). The built draft is not read
  (BUILDS_DRAFT False): the installed code would allow reading its config keys (0.10.2's
  `SpeculatorsConfig`), but parity carries the reads in the built-draft contract, judged only
  beside a built draft: a contract holding reads alone would report a built draft compared in
  every field. They come with these releases' built draft.
- `BuiltByProposerStatement` (0.8.5): `EagleProposer.load_model` does not ask the registry for the
  draft class: it builds `Eagle3LlamaForCausalLM(model_config=draft_model_config,
  start_layer_id=<target layers>)` in its statement `if self.vllm_config.speculative_config.method
  == 'eagle':` (else eagle3), then loads the checkpoint with the draft's own `load_weights` (no
  `process_weights_after_loading`). parity runs that statement of the installed method. The
  target's embedding is shared only when the draft's checkpoint loaded none: `if
  'model.embed_tokens.weight' not in loaded_weights:` (a draft with its own embedding keeps it,
  whatever its shape); an EAGLE-3 draft never gets the target's LM head. parity runs that
  statement with the names the draft's `load_weights` returned. The built draft is not read
  (BUILDS_DRAFT False): 0.8.5 has no speculators-format config class (no
  `transformers_utils/configs/speculators`), and reads of the EAGLE-3 form would be recordable
  around the build statement, but, as for 0.9-0.10, they come with this release's built draft.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .. import launch
from .target import logits_as_proposed
from ....config_reads import converted_fields, read_fields, recording
from ....run_until import CodePathMoved, find_statement, run_statement

# The `if` tests of the installed `EagleProposer.load_model` (0.9-0.10) that share the target's
# embedding and LM head with the draft, as each release writes them (newest first).
SHARE_EMBEDDING_TESTS = (
    "get_pp_group().world_size == 1 and self.model.model.embed_tokens.weight.shape == "
    "target_language_model.model.embed_tokens.weight.shape",  # 0.9.2-0.10.x
    "get_pp_group().world_size == 1 and self.model.model.embed_tokens.weight.shape == "
    "target_model.model.embed_tokens.weight.shape",  # 0.9.1
    "get_pp_group().world_size == 1",  # 0.9.0, 0.9.0.1: whatever the shapes
)
SHARE_HEAD_TESTS = (
    "self.vllm_config.speculative_config.method != 'eagle3' and hasattr(target_language_model, 'lm_head')",
    "self.vllm_config.speculative_config.method != 'eagle3' and hasattr(target_model, 'lm_head')",  # 0.9.0-0.9.1
)
# 0.8.5's `EagleProposer.load_model`: the statement building the draft class and the one sharing
# the target's embedding.
BUILD_TEST = "self.vllm_config.speculative_config.method == 'eagle'"  # ... else: Eagle3LlamaForCausalLM(...)
UNLOADED_EMBEDDING_TEST = "'model.embed_tokens.weight' not in loaded_weights"


class Draft:
    """The draft as the proposer builds, loads and shares it, and what its class applies."""

    BUILDS_DRAFT = True  # the built draft (parity.contract.BuiltDraft) is read and compared

    def build_draft(self, vllm_config, prefix: str = "draft"):
        """The draft class the proposer builds from the speculative config's draft model config
        (once per config: its layers register in the config's layer registry)."""
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import initialize_model

        draft_config = vllm_config.speculative_config.draft_model_config
        with set_current_vllm_config(vllm_config):
            return initialize_model(vllm_config=vllm_config, model_config=draft_config, prefix=prefix).eval()

    def load_draft_weights(self, draft, vllm_config, weights: list) -> None:
        """The draft's own `load_weights` (d2t renamed, t2d dropped), then the loader's
        `process_weights_after_loading`."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import process_weights_after_loading

        with set_current_vllm_config(vllm_config):
            draft.load_weights(weights)
            process_weights_after_loading(draft, vllm_config.speculative_config.draft_model_config,
                                          torch.device("cpu"))

    def share_with_target(self, draft, target, vllm_config) -> None:
        """Share the target's embedding and LM head with the draft exactly where the proposer
        does: its own `_maybe_share_embeddings` / `_maybe_share_lm_head`, run on a holder of
        the draft (the real proposer allocates device buffers: a GPU)."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = _Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            EagleProposer._maybe_share_embeddings(holder, target)
            EagleProposer._maybe_share_lm_head(holder, target)

    def draft_graph(self, draft) -> dict:
        """The graph flags vLLM's draft class stores (what its forward applies)."""
        inner = draft.model
        layer = inner.layers[0]
        return {"norm_before_fc": bool(getattr(inner, "norm_before_fc", False)),
                "fc_norm": getattr(inner, "fc_norm", None) is not None,
                "norm_output": bool(getattr(inner, "norm_output", False)),
                "norm_before_residual": getattr(layer, "_residual_norm", None) is not None and
                getattr(layer._residual_norm, "__func__", None) is getattr(type(layer), "_norm_before_residual", 0)}

    def draft_embedding(self, draft, vllm_config, target, checkpoint: str | None = None) -> str:
        """Whose token embedding the served `draft` (just built) uses: its checkpoint loaded by
        its own `load_weights`, then the proposer's own sharing with `target` ("target" or "draft").
        `checkpoint`: the real draft of a draft built at tiny widths; its tensor names decide
        (an embed_tokens tensor is fed at the tiny width, distinct from the target's)."""
        import torch
        from safetensors import safe_open
        from safetensors.torch import load_file

        weights = {}
        if checkpoint is None:
            for f in sorted(Path(vllm_config.speculative_config.draft_model_config.model).glob("*.safetensors")):
                weights.update(load_file(str(f)))
        else:
            for f in sorted(Path(checkpoint).glob("*.safetensors")):
                with safe_open(str(f), framework="pt") as fh:
                    for name in fh.keys():
                        if "embed_tokens" in name:
                            weights[name] = torch.randn(draft.model.embed_tokens.weight.shape)
        self.load_draft_weights(draft, vllm_config, list(weights.items()))
        self.share_with_target(draft, target, vllm_config)
        return "target" if draft.model.embed_tokens is self.target_embedding(target) else "draft"

    @staticmethod
    def target_embedding(target):
        """The target's token embedding, where the proposer's sharing looks for it: its inner
        model's `embed_tokens`, or `embedding` (gpt-oss)."""
        inner = target.model
        return inner.embed_tokens if hasattr(inner, "embed_tokens") else inner.embedding

    def real_draft_sizes(self, draft_dir: str) -> dict:
        """The draft vocabulary vLLM's draft class takes from the draft's own config files: vLLM's
        config reader (`transformers_utils.config.get_config`, which turns a speculators-format
        config into the draft's HF config) run on the directory as given, never on the shrunk copy
        the class is built from; then the class's own rule (`LlamaForCausalLMEagle3.__init__`:
        without a draft_vocab_size, the draft's vocab_size)."""
        from vllm.transformers_utils.config import get_config

        config = get_config(draft_dir, trust_remote_code=False)
        draft_vocab = getattr(config, "draft_vocab_size", None)
        return {"draft_vocab_size": draft_vocab if draft_vocab is not None else getattr(config, "vocab_size", None)}

    def draft_facts(self, vllm_config, target=None, checkpoint: str | None = None,
                    reads: set[str] | None = None, dict_reads: dict[str, set[str]] | None = None) -> dict:
        """What vLLM's own draft class (built from the draft's config, as the proposer builds it)
        applies: the graph flags it stores and, run on probes, how a draft token index becomes a
        target id (`compute_logits` with a known d2t), whether `load_weights` takes a t2d and
        (given the built `target`) whose embedding it uses. With `reads` (the draft config's
        attributes vLLM's config classes read building `vllm_config`, parity.extract.config_reads):
        the class's constructor's reads are added, and the config keys it read (`config_keys`;
        `dict_reads`: the reads of the served config.json as a dict, `config_reads.reading_dicts`)."""
        import torch

        if reads is None:
            draft = self.build_draft(vllm_config)  # once: a release may name its layers whatever the prefix
        else:
            with recording(reads, skip=self.target_configs(vllm_config)):
                draft = self.build_draft(vllm_config)
        module = self.draft_module_facts(draft)  # as built: before any weight is loaded or shared
        if len(draft.model.layers) > 1:  # drawn before vLLM processes the weights: its CPU linears keep them
            from ....built import seeded  # deferred: heavy, parity.extract.built imports torch

            seeded(draft)
        keys = self.config_keys(draft, vllm_config, checkpoint, reads, dict_reads or {}) if reads is not None else {}
        if target is not None:  # loads the checkpoint (and processes the weights), then shares
            embedding = self.draft_embedding(draft, vllm_config, target, checkpoint)
        else:
            from vllm.config import set_current_vllm_config
            from vllm.model_executor.model_loader.utils import process_weights_after_loading

            embedding = "unknown"
            with set_current_vllm_config(vllm_config):
                process_weights_after_loading(draft, vllm_config.speculative_config.draft_model_config,
                                              torch.device("cpu"))
        module.update(self.layer_wiring(draft, vllm_config))
        graph = self.draft_graph(draft)
        return {"graph": graph, "vocab": self.vocab_mapping(draft, vllm_config), "embedding": embedding,
                "module": module, "config_keys": keys, "class": f"{type(draft).__module__}.{type(draft).__name__}"}

    @staticmethod
    def vocab_mapping(draft, vllm_config) -> dict:
        """How the built draft maps a draft token index to a target id (its compute_logits run with
        a known d2t), and whether its load_weights takes a t2d. The built class's sizes are the
        shrunk copy's: used to run it, never reported (the contract's sizes are
        `real_draft_sizes`', parity.contract.sources)."""
        import torch

        draft_vocab, target_vocab = draft.config.draft_vocab_size, vllm_config.model_config.get_vocab_size()
        mapping = getattr(draft, "draft_id_to_target_id", None)
        if mapping is None:
            return {"d2t": "absent", "t2d": "absent", "mapping": "draft index = target id (same vocabulary)"}
        # d2t = shift everywhere: offsets put draft index i at target id i + shift, absolute all at
        # shift (0 when the draft vocabulary is the target's: i + 1 would leave it)
        shift = 1 if draft_vocab < target_vocab else 0
        with torch.no_grad():
            mapping.fill_(shift)
            for p in draft.lm_head.parameters():
                p.copy_(torch.randn(p.shape))
            logits = draft.compute_logits(torch.randn(1, draft.config.hidden_size))
        finite = torch.isfinite(logits[0]).nonzero().flatten().tolist()
        d2t = ("offsets" if finite == [i + shift for i in range(draft_vocab)] else
               "absolute" if finite == [shift] else "unknown")
        before = {k: v.clone() for k, v in draft.state_dict().items()}
        draft.load_weights([("t2d", torch.ones(target_vocab, dtype=torch.bool))])
        same = lambda a, b: bool(((a == b) | (a.isnan() & b.isnan())).all())  # noqa: E731 (uninitialised: NaN)
        t2d = "ignored" if all(same(before[k], v) for k, v in draft.state_dict().items()) else "present"
        return {"d2t": d2t, "t2d": t2d, "mapping": f"target id = draft index + d2t[draft index] (compute_logits; "
                f"ran it: d2t = {shift} put draft index 0 at target id {finite[0] if finite else None})"}

    @staticmethod
    def layer_wiring(draft, vllm_config) -> dict:
        """The decoder layers vLLM's draft class built, and which norm each after the first applies
        to its input (parity.extract.built.later_layer_input_norms), found on one forward of the
        draft as the proposer runs it: `combine_hidden_states` (the fc), then its forward, over
        parity's attention stand-in (its parameters drawn before vLLM processed them)."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.forward_context import set_forward_context

        from ....built import later_layer_input_norms  # deferred: heavy, parity.extract.built imports torch

        def forward():
            gen = torch.Generator().manual_seed(3)
            t = 6
            ids = torch.randint(0, draft.config.vocab_size, (t,), generator=gen)
            # 0.12-0.21's class keeps no fc_input_size (0.22 on): its fc's own input_size
            width = getattr(draft.model, "fc_input_size", None) or draft.model.fc.input_size
            aux = torch.randn(t, width, generator=gen)
            with set_current_vllm_config(vllm_config), set_forward_context(None, vllm_config, num_tokens=t):
                draft(input_ids=ids, positions=torch.arange(t), hidden_states=draft.combine_hidden_states(aux))

        layers = list(draft.model.layers)
        return {"layers_built": len(layers), "later_layer_input_norms": later_layer_input_norms(layers, forward)}

    # The `SpeculatorsConfig` method whose result its `from_pretrained` builds the class from (the
    # loaded config.json dict in, the class's keyword arguments out; 0.11: extract_vllm_speculative_config).
    SPECULATORS_CONVERSION = "extract_transformers_pre_trained_config"

    def config_keys(self, draft, vllm_config, checkpoint: str | None, reads: set[str],
                    dict_reads: dict[str, set[str]]) -> dict:
        """BuiltDraft's config_keys_read/unread/default for the real draft config.json (`checkpoint`,
        else the directory the draft was built from), given `reads`. The draft's hf_config is vLLM's
        `EAGLEConfig`, which holds the config class the draft's config.json builds as `model` and
        copies every field of it: keys are followed through that class. A speculators-format
        config (`speculators_config`) vLLM reads as a dict (`dict_reads`: its config parser picks
        the format by `speculators_config`, its `SpeculatorsConfig.extract_transformers_pre_trained_config`
        starts from `transformer_layer_config` and copies the EAGLE-3 keys of the top level into it)
        and builds its `SpeculatorsConfig` from the result (SPECULATORS_CONVERSION, as its
        `from_pretrained` does): keys are followed through that conversion
        (`config_reads.converted_fields`), nested ones spelled bare."""
        from transformers import PretrainedConfig

        folder = checkpoint or vllm_config.speculative_config.draft_model_config.model
        raw = json.loads((Path(folder) / "config.json").read_text())
        inner = getattr(draft.config, "model", None)
        config = inner if isinstance(inner, PretrainedConfig) else draft.config
        if "speculators_config" in raw:
            from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig  # 0.11 on

            convert = getattr(SpeculatorsConfig, self.SPECULATORS_CONVERSION)
            return converted_fields(config, raw, "transformer_layer_config", convert,
                                    lambda d: SpeculatorsConfig(**convert(d)), reads, dict_reads)
        return read_fields(config, raw, reads)

    @staticmethod
    def draft_module_facts(draft) -> dict:
        """What the draft class built at tiny widths computes (parity.extract.built): its rotary
        table (`get_rope`'s `cos_sin_cache`), its RMSNorms' eps, its MLP's activation, and whether
        its lm_head is its own token embedding (`Eagle3LlamaForCausalLM` builds a separate
        `ParallelLMHead` whatever tie_word_embeddings says)."""
        from ....built import module_facts  # deferred: heavy, parity.extract.built imports torch

        return module_facts(draft, draft.model.embed_tokens, getattr(draft, "lm_head", None))

    def real_draft_built(self, draft_dir: str, target_config: dict) -> dict:
        """The built draft's sizes as vLLM reads the draft's real config: `get_config` on the
        directory as given (what the draft's ModelConfig holds as hf_config), with the class's
        own defaults (`Eagle3LlamaForCausalLM.__init__`: draft_vocab_size = vocab_size when
        absent; its LlamaModel: target_hidden_size = hidden_size; LlamaAttention: head_dim =
        hidden_size / heads). The dtype is the target's: `SpeculativeConfig` builds the draft's
        ModelConfig with `dtype=target_model_config.dtype`, which for a served target is
        `_get_and_verify_dtype(..., "auto")` on the target's real config."""
        from vllm.config.model import _get_and_verify_dtype
        from vllm.transformers_utils.config import get_config

        from ....built import dtype_name, hf_sizes  # deferred: heavy, parity.extract.built imports torch

        built = hf_sizes(get_config(draft_dir, trust_remote_code=False))
        model_dir = launch.write_model_dir(Path(tempfile.mkdtemp(prefix="parity-vllm-dtype-")), target_config)
        target = get_config(model_dir, trust_remote_code=False)
        text = target.get_text_config() if hasattr(target, "get_text_config") else target
        built["dtype"] = dtype_name(_get_and_verify_dtype(model_dir, text, "auto", is_pooling_model=False))
        return built


class SharedByV2LoadEagleModel(Draft):
    """The target's embedding and LM head shared as V2's `load_eagle_model` shares them."""

    def share_with_target(self, draft, target, vllm_config) -> None:
        """Share the target's embedding and LM head with the draft exactly as V2's
        `load_eagle_model` does after building it: on the target's language model (a
        multimodal target's `get_language_model()`), its embedding, then its LM head."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.worker.gpu.spec_decode.eagle.utils import (
            get_target_lm_head,
            maybe_share_target_embed,
            share_target_lm_head,
        )

        language_model = target.get_language_model() if hasattr(target, "get_language_model") else target
        spec = vllm_config.speculative_config
        with set_current_vllm_config(vllm_config):
            maybe_share_target_embed(draft, draft.model, language_model.model)
            share_target_lm_head(draft, get_target_lm_head(target, language_model),
                                 spec.draft_lm_head_quantization)


class SharedByLoadModelStatements(Draft):
    """The speculators-format conversion, the key `num_hidden_layers` at its default, and the
    proposer's sharing statements of 0.11."""

    # Its `SpeculatorsConfig.from_pretrained` builds the class from this method's result: the
    # layer's keys, the speculative method and token count, and the algorithm's own keys.
    SPECULATORS_CONVERSION = "extract_vllm_speculative_config"

    def config_keys(self, draft, vllm_config, checkpoint: str | None, reads: set[str],
                    dict_reads: dict[str, set[str]]) -> dict:
        """`Draft`'s, and `num_hidden_layers` at its default where the class, which builds one decoder
        layer without reading it, built as many as the config sets: the key changes nothing 0.11
        builds (a config with more is a drift, on this key and on the layers built)."""
        keys = super().config_keys(draft, vllm_config, checkpoint, reads, dict_reads)
        folder = checkpoint or vllm_config.speculative_config.draft_model_config.model
        raw = json.loads((Path(folder) / "config.json").read_text())
        layer = raw.get("transformer_layer_config") if isinstance(raw.get("transformer_layer_config"), dict) else raw
        if ("num_hidden_layers" in keys.get("config_keys_unread", ())
                and layer.get("num_hidden_layers") == len(draft.model.layers)):
            keys["config_keys_default"] = sorted({*keys.get("config_keys_default", ()), "num_hidden_layers"})
        return keys

    def share_with_target(self, draft, target, vllm_config) -> None:
        """0.11's proposer shares inside `EagleProposer.load_model`: the target's embedding
        whenever the shapes match (a draft's own embedding is dropped), the LM head for EAGLE-3
        when its shape matches. Those two statements of the installed method run on a holder."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = _Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            for test in ("get_pp_group().world_size == 1", "self.vllm_config.speculative_config.method != 'eagle3'"):
                run_statement(EagleProposer.load_model, test, holder, target_language_model=target)


class SharedByFirstStatementFound(Draft):
    """The draft's `compute_logits` taking the proposer's None, and the proposer's sharing statements."""

    BUILDS_DRAFT = False  # the contract says its draft is not compared

    def build_draft(self, vllm_config, prefix: str = "draft"):
        """`Draft`'s build, with the draft's `compute_logits(hidden_states,
        sampling_metadata)` taking the `None` the V1 proposer passes it (`compute_logits(
        sample_hidden_states, None)`): these releases' draft classes have no default for it."""
        return logits_as_proposed(super().build_draft(vllm_config, prefix))

    def share_with_target(self, draft, target, vllm_config) -> None:
        """The installed `EagleProposer.load_model`'s two sharing statements, run on a holder of
        the draft with the target under both names the releases give it."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = _Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            for tests in (SHARE_EMBEDDING_TESTS, SHARE_HEAD_TESTS):
                run_statement(EagleProposer.load_model, first_statement(EagleProposer.load_model, tests), holder,
                              target_model=target, target_language_model=target)


class BuiltByProposerStatement(Draft):
    """The proposer's own statement building the draft class, its loading and its sharing statement."""

    BUILDS_DRAFT = False  # the contract says its draft is not compared

    def __init__(self) -> None:
        self.loaded: set[str] = set()  # the names the draft's load_weights returned (the sharing reads them)

    def build_draft(self, vllm_config, prefix: str = "draft"):
        """The draft class as the installed `EagleProposer.load_model` builds it: its own statement,
        run on a holder, in the draft's dtype and with the config current (as the method does)."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import set_default_torch_dtype
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = _Proposer(None, vllm_config)
        draft_config = vllm_config.speculative_config.draft_model_config
        with set_default_torch_dtype(draft_config.dtype), set_current_vllm_config(vllm_config):
            run_statement(EagleProposer.load_model, BUILD_TEST, holder, draft_model_config=draft_config,
                          target_layer_num=vllm_config.model_config.get_num_layers(vllm_config.parallel_config),
                          target_device=torch.device("cpu"))
        return logits_as_proposed(holder.model.eval())

    def load_draft_weights(self, draft, vllm_config, weights: list) -> None:
        """The draft's own `load_weights` (the proposer runs nothing after it); the names it
        loaded are kept for the sharing statement."""
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(vllm_config):
            self.loaded = set(draft.load_weights(weights))

    def share_with_target(self, draft, target, vllm_config) -> None:
        """The installed method's `if 'model.embed_tokens.weight' not in loaded_weights:` (the
        target's embedding for a draft whose checkpoint has none), on a holder of the draft."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = _Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            run_statement(EagleProposer.load_model, UNLOADED_EMBEDDING_TEST, holder, target_model=target,
                          loaded_weights=self.loaded)


def first_statement(func, tests: tuple[str, ...]) -> str:
    """The first of `tests` whose `if` statement is in `func`'s installed source; CodePathMoved
    naming every one looked for when none is."""
    for test in tests:
        try:
            find_statement(func, test)
        except CodePathMoved:
            continue
        return test
    raise CodePathMoved(f"looked for one of the statements {' | '.join(f'`if {t}:`' for t in tests)} in "
                        f"{func.__module__}.{func.__qualname__}; there is none")


class _Proposer:
    """What the proposer's two sharing methods read of `self`: the draft model and the config."""

    def __init__(self, model, vllm_config):
        self.model, self.vllm_config = model, vllm_config
        # set from the speculative config by the proposer's __init__; the sharing code checks it
        self.use_local_argmax_reduction = getattr(vllm_config.speculative_config, "use_local_argmax_reduction", False)

    def __getattr__(self, name):
        raise AttributeError(f"parity's proposer holder has no {name!r}: vLLM's sharing code reads more "
                             "than parity set up")
