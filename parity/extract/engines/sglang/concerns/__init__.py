"""The ways SGLang releases differ, one base per concern and its variants named by what they do
(each module says which releases run which variant, and why). A family (families/) is a short
table whose `Adapter` picks exactly one variant of each concern; no family imports another, and a
variant extends its concern's base and at most one more variant of it.

The concerns, in the order a family's `Adapter` lists them:
- process (process.py): the process's set-up (CPU stand-ins before and after the engine is
  imported, the rotary embedding's device, the groups, the ranks of a layout) and the code-path
  check, the same for every family: each variant names the engine code it runs (its `*_PATHS`)
  and `check_code_paths` requires them all, then runs each concern's own statement checks;
- launch (launch.py): the server args, where the process-wide ones are published, how serve
  arguments are resolved (the launch contract), the speculative algorithm and its DFlash refusal;
- config (config.py): the engine's ModelConfig of a model, and a DFlash draft's config;
- capture (capture.py): where the draft's aux ids are read and how the target's capture is set;
- target (target.py): the target's build (and what the model runner runs before any model is
  built), weights and decoder;
- batches (batches.py): batches, forwards, KV pools and attention backends;
- context (context.py): where attention layers find their backend during a forward;
- draft (draft.py): the built draft, its layers, its embedding binding and its logits rows.

The extractor (probe.py) and the forward runner (forward_side.py) call only the adapter protocol's
members (parity.extract.engines.sglang.adapter) and never branch on versions. SGLang's own modules
are imported inside the calls that run them (in the child, after parity's CPU stand-ins are
installed); CPU shims are each the smallest that lets the real code run (docs/engines-on-cpu.md).
"""
