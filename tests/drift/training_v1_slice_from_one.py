"""Test-only: run the training probe against a speculators whose v1 data path drifted.

    python -m tests.drift.training_v1_slice_from_one  < request.json

Patches the installed `speculators.train.data.standardize_data_v1` (the v1 sample's
standardization, 0.3-0.7) so the fc input is every dumped slot but the first
(`hidden_states[1:]`) instead of all but the last, then runs the unchanged probe. Both of its
callers look it up at call time: `SampleFileDataset._get_raw_data` (0.5-0.7) and the
`standardize_fn` that training (and the 0.3 family's runner) hands `Eagle3SampleFileDataset`
(0.3-0.4). The extractor must report the new slots without being told.
"""

import speculators.train.data as data
import torch

from parity.extract.trainers.speculators import probe

_original = data.standardize_data_v1


def _drifted(sample):
    out = _original(sample)
    out["hidden_states"] = torch.cat(sample["hidden_states"][1:], dim=-1)  # from slot 1 on
    return out


data.standardize_data_v1 = _drifted

if __name__ == "__main__":
    probe.main()
