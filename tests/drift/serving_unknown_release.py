"""Injected: the installed SGLang reports a release parity has no adapter for (0.5.13).

Run as `python -m tests.drift.serving_unknown_release` in place of the serving probe; the
real `adapter_for` must refuse it and the matrix must show a loud "cannot extract" cell."""

from importlib import metadata as _metadata

from parity.extract.engines.sglang import probe


class _Metadata:
    @staticmethod
    def version(name: str) -> str:
        return "0.5.13" if name == "sglang" else _metadata.version(name)


probe.metadata = _Metadata

if __name__ == "__main__":
    raise SystemExit(probe.main())
