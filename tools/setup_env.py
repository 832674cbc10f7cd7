"""Build parity's environments from envs.toml: `./dev setup [NAME ...]` (stdlib only).

    python3 tools/setup_env.py            # every environment
    python3 tools/setup_env.py main       # just one

Runs with any Python >= 3.11, before any environment exists: the builder (parity/build_env.py)
and what it imports use the standard library only.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from parity.build_env import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
