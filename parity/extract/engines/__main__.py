"""`python -m parity.extract.engines ENGINE`, run in a release environment (parity.ondemand,
building an environment for a release no one has pinned): the top-level modules that ENGINE's
code paths import but the environment lacks, as a JSON list on stdout's last line (each release
family's code-path check, run as each extraction runs it)."""

from __future__ import annotations

import importlib
import json
import sys


def main(engine: str) -> None:
    found = importlib.import_module(f"{__package__}.{engine}.families").missing_modules()
    print(json.dumps(sorted(set(found) - {engine})))


if __name__ == "__main__":
    main(sys.argv[1])
