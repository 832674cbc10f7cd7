"""parity: contract tests for EAGLE-3 train/serve parity."""

import gc as _gc
import os as _os
import sys as _sys

_started_as = getattr(_sys, "orig_argv", [])  # the command line as given (Python 3.10+)
if _sys.argv[:1] == ["-m"] and "-m" in _started_as and _started_as[_started_as.index("-m") + 1:][:1] != ["parity"]:
    # `python -m parity.<module>` is starting: a probe or forward-side child, a forkserver, a
    # fixture build (not the CLI). It imports torch and an engine (millions of objects, few of
    # them in cycles) and lives seconds: the cyclic collector runs less often (every 100,000
    # allocations, not 700), about 1 s less of an SGLang child's 16 s. When it runs is all
    # this changes: no value any child computes depends on it. (A forkserver also turns it off
    # while it imports, and freezes what it imported: parity.forkserver._warm.)
    _gc.set_threshold(100_000, 50, 1000)

if _os.environ.get("PARITY_RECORD_READS") == "1":  # a child whose reply may be cached: record
    from . import reads as _reads  # noqa: F401  what it reads from the start (parity.reads)

__version__ = "0.1.0"
