"""Injected: the installed SGLang reports a release parity has never seen (0.5.99, newer
than every verified release); its code is the installed 0.5.23's, unchanged.

Run as `python -m tests.drift.serving_unseen_release` in place of the serving probe: the
real family placement must run it with the newest family whose code paths are all found
(0.5.23), name every captured tensor as usual, and say so in the reply."""

from importlib import metadata as _metadata

from parity.extract.engines.sglang import probe

UNSEEN = "0.5.99"


class _Metadata:
    @staticmethod
    def version(name: str) -> str:
        return UNSEEN if name == "sglang" else _metadata.version(name)


probe.metadata = _Metadata

if __name__ == "__main__":
    raise SystemExit(probe.main())
