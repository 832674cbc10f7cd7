"""A kernel launched through Triton's GPU runtime off a GPU is a limit of parity's CPU run
(child.harness_limit), typed by the frame it failed in, and the reply made from it still names
the release that stopped (child.with_limits)."""

from __future__ import annotations

from importlib import metadata

from parity.extract.child import HARNESS_LIMIT_KEY, harness_limit, with_limits

# Raised from code whose file is Triton's driver module, as a launch on a CPU machine raises it.
_TRITON_DRIVER = "/env/lib/python3.11/site-packages/triton/runtime/driver.py"
_ELSEWHERE = "/env/lib/python3.11/site-packages/somepackage/runtime/driver.py"


def _raised_in(filename: str) -> RuntimeError:
    code = compile("def _create_driver():\n    raise RuntimeError('0 active drivers ([]).')\n", filename, "exec")
    scope: dict = {}
    exec(code, scope)
    try:
        scope["_create_driver"]()
    except RuntimeError as exc:
        return exc
    raise AssertionError("not raised")


def test_a_failure_inside_tritons_gpu_runtime_is_a_cuda_only_path():
    limit = harness_limit(_raised_in(_TRITON_DRIVER))
    assert limit is not None and limit.startswith("a CUDA-only code path"), limit


def test_the_same_failure_elsewhere_is_no_limit():
    # the injected drift: same words, raised by a package that is not a GPU runtime
    assert harness_limit(_raised_in(_ELSEWHERE)) is None


def test_a_reply_from_an_escaped_limit_names_the_installed_release():
    def handler(request):
        raise _raised_in(_TRITON_DRIVER)

    reply = with_limits(handler, "sglang")({})
    assert reply[HARNESS_LIMIT_KEY].startswith("a CUDA-only code path")
    assert reply["release"] == metadata.version("sglang")
