"""Forward (logits) parity: the training path and the serving path give the same draft logits.

- the trainer's forward module (for speculators, `extract.trainers.speculators.forward_side`)
  runs the installed trainer: target states dumped in the training layout -> ArrowDataset +
  shift_batch -> Eagle3DraftModel, with hooks per TTT step;
- the engine's forward module (for SGLang, `extract.engines.sglang.forward_side`) runs the
  installed engine: target with the draft's capture ids -> aux states -> the engine's draft
  class (prefill, then per-position decode chains), with hooks;
- `compare` aligns rows (shift_batch vs SGLang's shifted prefill) and finds the first stage
  that diverged (fc input, fc output, embeddings, layer output, logits, vocab mapping);
- `tolerances` is the one place the dtype-aware bounds and their reasons live;
- `cases` builds fixture pairs and injects drifts; `run.forward_parity` runs it all;
- `cli` is `parity forward`; `report` renders the table.
"""
