"""Running one child process of parity: a fresh `python -m MODULE`, or a fork of a warmed
server that has already imported it (parity.forkserver), in a private TMPDIR inside the
workspace (parity.workspace), killed with anything it started if the wait is interrupted."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from . import forkserver
from .workspace import private_caches, private_dir, running


def run_child(cmd: list[str], input_text: str, env: dict[str, str], timeout: float,
              cwd: Path | str | None = None, *, warm: str | None = None) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, input=..., capture_output=True, text=True)`, but the child gets a
    private TMPDIR that is removed when it ends, and is killed (with anything it started) if
    the wait is interrupted: Ctrl-C, `kill -INT` of this process, a timeout, an error.

    `warm`: `cmd` is `[python, "-m", MODULE]` and may run as a fork of a server that has
    imported the module `warm` (MODULE before any override; parity.forkserver), falling back
    to a fresh process when no server can be reached."""
    tmp = private_dir("parity-child-")
    env = private_caches(env, tmp)
    # Torch inductor precompiles a 150 MB header into TMPDIR before loading any C++ kernel,
    # even one SGLang has cached in its own SGLANG_CACHE_DIR: with a TMPDIR that dies with the
    # child that would be rebuilt (seconds of gcc) by every probe. Kernels compile without it.
    env.setdefault("TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS", "0")
    try:
        forkserver.last.how = "fresh"
        if warm is not None and forkserver.enabled():
            try:
                return forkserver.run(cmd[0], cmd[-1], warm, input_text, env, timeout, str(cwd or os.getcwd()), tmp)
            except forkserver.Stale:
                forkserver.last.how = "fresh, server stale"  # a fresh process gives the same reply
            except forkserver.Unavailable:
                forkserver.last.how = "fresh, no server"
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                                start_new_session=True)
        with running(proc):
            out, err = proc.communicate(input_text, timeout=timeout)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["run_child"]
