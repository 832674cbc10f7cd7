"""The ways vLLM releases differ, one base per concern and its variants named by what they do
(each module says which releases run which variant, and why). A family (families/) is a short
table whose `Adapter` picks exactly one variant of each concern; no family imports another, and a
variant extends its concern's base and at most one more variant of it.

The concerns, in the order a family's `Adapter` lists them:
- launch (launch.py): how serve arguments resolve (the launch contract), whether DFlash drafts
  and a layout of several ranks run;
- platform (platform.py): everything before any vLLM model code runs, the CPU platform's
  selection among it;
- kernels (kernels.py): parity's stand-ins for the kernel bodies the CUDA wheel lacks on a CPU;
- config (config.py): vLLM's config classes as `LLM(...)` builds them, and the process group;
- runner (runner.py): the model runner a GPU deployment gets;
- target (target.py): the target as vLLM's loader builds it;
- capture (capture.py): the aux ids each model runner sets, the forward and what it captures;
- dump (dump.py): the data-generation dump;
- draft (draft.py): the draft as the proposer builds, loads and shares it, and what its class applies.

The extractor (probe.py) and the forward runner (forward_side.py) call only the adapter protocol's
members (parity.extract.engines.vllm.adapter) and never branch on releases. Nothing here imports
vLLM or torch at the top: a family is imported (and placed) before vLLM picks its platform on
import, so vLLM's modules, torch and parity's modules that import torch (kernels, moe_cpu,
parity.extract.built) are imported inside the calls that need them, each of parity's marked so.
"""
