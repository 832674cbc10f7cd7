"""The ways ModelOpt releases differ, one variant per concern, named by what it does. A family
(families/) is a short table picking one variant of each concern; no family imports another.

What every release so far does the same way (its HF path, `HFEagleModel`):
- the aux ids: `eagle_architecture_config.eagle_aux_hidden_state_layer_ids`, else its default
  (`_set_default_aux_hidden_state_layers`: `list(set([1, N//2-1, N-4]))`, a set's order, before
  0.45; sorted from 0.45), set on `model.eagle_config` by the conversion;
- the capture: a forward hook on each base decoder layer whose index is among the ids
  (`_collect_aux_hidden_states_forward_hook`), concatenated in the order the hooks fire (layer
  order) into the draft's `eagle_module.fc`;
- the loss target: the base model's own logits (`model.lm_head` on its last hidden state), detached.

Concerns (each function's signature is the concern's, the same in every variant):
- conversion, `convert(model, ids, arch, export_rope_scaling)`: the HF model made ModelOpt's EAGLE-3
  training model by its own `modelopt.torch.speculative.convert`:
  - `convert_whole_default` (0.35 to 0.42): the conversion takes the architecture config without
    merging defaults, so the run passes the release's own `EAGLE3_DEFAULT_CFG` architecture
    updated with the base model's widths and the run's (what its example `main.py` does);
  - `convert_merged` (0.43): the conversion merges the run's architecture over its defaults;
    `eagle_decoder_type` "llama" is given, nothing else;
  - `convert_merged_no_compile` (0.44 on): the same, `eagle_use_torch_compile` off (a CPU run) and
    the run's `eagle_export_rope_scaling` when given;
- export, `export(model, out_dir) -> bool`: the release's exporter of the served draft folder:
  - `no_exporter` (0.35): the package has none (`export_hf_checkpoint` skips `eagle_module`): False;
  - `export_checkpoint` (0.37 to 0.42): `export_hf_checkpoint`, which writes the draft alone for a
    model whose only optimisation is EAGLE (`hf_spec_export`'s config template);
  - `export_speculative` (0.43 on): `export_speculative_decoding`;
- rotary, `rotary(model, draft)`: where the draft's rotary embedding lives:
  - `rotary_on_model` (0.35 to 0.40): `model.eagle_rotary_emb`, made at conversion;
  - `rotary_in_draft` (0.41 on): the draft module's own, made on its first forward;
- mode, `mode(model)`: the module mode the probe's forward runs the training model in:
  - `training_mode` (0.35 to 0.39): its forward runs the draft only in training;
  - `eval_mode` (0.40 on): its forward runs the draft's first step in eval as in training, and from
    0.42 training wraps the draft's attention in `enable_cp_ttt_patch`, which allows only the cuDNN
    kernel (no CPU one); the fc input and the loss target are the same in both;
- where the converted model keeps what the probe reads (every release so far: `HFEagleModel`'s
  attributes): `resolved_ids(model)` (its default where the run gave none), `fc(model)`,
  `lm_head(model)`, `draft(model)`;

The rope a draft trained with is found by running, the same way in every release: the probe's
run converts with the release's default rope, its exporter's output says whether the served
config's rope is one it wrote over the trained one, and any other served rope is converted with.
"""

from __future__ import annotations

import copy

# What every family imports (parity.forkserver warms them) and the code paths it records, by role;
# a family names the pieces that differ (`code_paths`).
IMPORTS = ("transformers", "modelopt.torch.speculative", "modelopt.torch.export")
EXPORTERS = {
    "none": "none in the package: export_hf_checkpoint skips eagle_module",
    "checkpoint": "modelopt.torch.export.export_hf_checkpoint -> plugins.hf_spec_export (config template)",
    "speculative": "modelopt.torch.export.export_speculative_decoding -> plugins.hf_spec_export (config template)",
}


def code_paths(*, pop: str, draft: str, export: str, ids: str = "HFEagleModel._set_default_aux_hidden_state_layers",
               loss_target: str = "HFEagleModel.forward: the base model's lm_head logits, detached") -> dict[str, str]:
    """A family's CODE_PATHS: the calls every release runs, with its own `pop` (the method that
    gathers the captured states), `draft` (its draft module and rotary), `export` (its exporter: a
    key of EXPORTERS, or the path itself), default `ids` and `loss_target`."""
    return {
        "convert": "modelopt.torch.speculative.convert(model, [('eagle', config)]) -> HFEagleModel.modify",
        "ids": f"eagle_architecture_config.eagle_aux_hidden_state_layer_ids, else {ids}",
        "capture": f"HFEagleModel._collect_aux_hidden_states_forward_hook -> HFEagleModel.{pop} -> eagle_module.fc",
        "loss_target": loss_target,
        "draft": f"model.eagle_module ({draft})",
        "export": EXPORTERS.get(export, export),
    }


def _with_ids(arch: dict, ids: list[int] | None) -> dict:
    return {**arch, **({"eagle_aux_hidden_state_layer_ids": list(ids)} if ids is not None else {})}


def convert_whole_default(model, ids: list[int] | None, arch: dict, export_rope_scaling: dict | None = None):
    """0.35 to 0.42: the release's whole EAGLE-3 default architecture, the base model's widths
    and the run's over it (the conversion merges nothing)."""
    import modelopt.torch.speculative as mtsp
    from modelopt.torch.speculative.config import EAGLE3_DEFAULT_CFG

    config = copy.deepcopy(EAGLE3_DEFAULT_CFG["config"])
    base = model.config
    config["eagle_architecture_config"].update({
        "hidden_size": base.hidden_size, "vocab_size": base.vocab_size, "draft_vocab_size": base.vocab_size,
        "max_position_embeddings": base.max_position_embeddings, **_with_ids(arch, ids)})
    return mtsp.convert(model, [("eagle", config)])


def convert_merged(model, ids: list[int] | None, arch: dict, export_rope_scaling: dict | None = None):
    """0.43: the run's architecture, merged over its defaults by the conversion."""
    import modelopt.torch.speculative as mtsp

    config = {"eagle_decoder_type": "llama", "eagle_architecture_config": _with_ids(arch, ids)}
    return mtsp.convert(model, [("eagle", config)])


def convert_merged_no_compile(model, ids: list[int] | None, arch: dict, export_rope_scaling: dict | None = None):
    """0.44 on: as `convert_merged`, torch.compile off, the run's export rope override when given."""
    import modelopt.torch.speculative as mtsp

    config = {"eagle_decoder_type": "llama", "eagle_use_torch_compile": False,
              "eagle_architecture_config": _with_ids(arch, ids)}
    if export_rope_scaling is not None:
        config["eagle_export_rope_scaling"] = export_rope_scaling
    return mtsp.convert(model, [("eagle", config)])


def no_exporter(model, out_dir: str) -> bool:
    """0.35: no exporter of the draft in the package."""
    return False


def export_checkpoint(model, out_dir: str) -> bool:
    """0.37 to 0.42: `export_hf_checkpoint`, the draft alone for an EAGLE-only model."""
    from modelopt.torch.export import export_hf_checkpoint

    export_hf_checkpoint(model.eval(), export_dir=out_dir)  # as a loaded model is (its export runs a forward)
    return True


def export_speculative(model, out_dir: str) -> bool:
    """0.43 on: `export_speculative_decoding`."""
    from modelopt.torch.export import export_speculative_decoding

    export_speculative_decoding(model.eval(), export_dir=out_dir)
    return True


def rotary_on_model(model, draft):
    return model.eagle_rotary_emb


def rotary_in_draft(model, draft):
    return draft


def training_mode(model):
    return model.train()


def eval_mode(model):
    return model.eval()


def resolved_ids(model) -> list[int]:
    return list(model.eagle_config.eagle_aux_hidden_state_layer_ids)


def fc(model):
    return model.eagle_module.fc


def lm_head(model):
    return model.lm_head


def draft(model):
    return model.eagle_module
