"""Test-only: run the training probe against a speculators whose arrow data path drifted.

    python -m tests.drift.training_slice_from_one  < request.json

Patches the installed `speculators.train.data.ArrowDataset._get_raw_data` so the fc input
is every dumped slot but the first (`hs[:, 1:]`) instead of all but the last, as a
future release might, then runs the unchanged probe. The extractor must report the new
slots without being told.
"""

import speculators.train.data as data

from parity.extract.trainers.speculators import probe

_original = data.ArrowDataset._get_raw_data


def _drifted(self, index):
    out = _original(self, index)
    raw = self.transfer.get_cached(self._map_to_file_idx(index))["hidden_states"]  # [T, L, H]
    out["hidden_states"] = raw[:, 1:].flatten(1)  # [T, (L-1)*H], from slot 1 on
    return out


data.ArrowDataset._get_raw_data = _drifted

if __name__ == "__main__":
    probe.main()
