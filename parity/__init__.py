"""parity: contract tests for EAGLE-3 train/serve parity."""

import os as _os

if _os.environ.get("PARITY_RECORD_READS") == "1":  # a child whose reply may be cached: record
    from . import reads as _reads  # noqa: F401  what it reads from the start (parity.reads)

__version__ = "0.1.0"
