"""The contract vocabulary: canonical hidden-state names, contracts, and their diff."""

from .datagen import DatagenDump
from .diff import ContractDiff, FieldDiff, SlotDiff, diff
from .models import (AssumedSize, BuiltDraft, Contract, Finding, FindingKind, GraphFlags, LaunchContract, LaunchFix, LaunchOverride, LayoutRun, LayoutStage, ParallelLayout, Provenance, ServingContract, TargetModel,
                     TrainedDepth, TrainingContract, VocabMapping, Whose, contract_json_schema, load_contract)
from .tap import Norm, Tap, names, parse_taps

__all__ = [
    "AssumedSize", "BuiltDraft", "Contract", "ContractDiff", "DatagenDump", "FieldDiff", "Finding", "FindingKind", "GraphFlags", "LaunchContract", "LaunchFix", "LaunchOverride", "LayoutRun", "LayoutStage", "Norm", "ParallelLayout", "Provenance",
    "ServingContract", "SlotDiff", "Tap", "TargetModel", "TrainedDepth", "TrainingContract", "VocabMapping", "Whose",
    "contract_json_schema", "diff", "load_contract", "names", "parse_taps",
]
