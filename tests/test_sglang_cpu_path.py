"""Telling SGLang's own non-CUDA code path from parity's harness (parity.extract.engines.sglang.cpu_path),
on small torch modules: no engine runs here (the releases themselves: tests/test_old_sglang_gpt_oss.py)."""

from __future__ import annotations

import pytest
import torch

from parity.extract.engines.sglang.cpu_path import method_lacks_argument, unread_parameters


class Op:  # an op in the shape of SGLang's multi-platform ops: the forward dispatches off CUDA
    def forward(self, *args, **kwargs):
        return self.forward_native(*args, **kwargs)

    def forward_cuda(self, x, fused_arg=None):
        return x

    def forward_native(self, x):
        return x


class Rope(Op):  # a subclass: the TypeError names the class that defines the method
    pass


class CudaNeither(Op):
    def forward_cuda(self, x):
        return x


def _raised(op, **kwargs) -> BaseException:
    with pytest.raises(TypeError) as exc:
        op.forward(1, **kwargs)
    return exc.value


def test_an_argument_only_the_cuda_method_takes_is_the_engines_non_cuda_path():
    assert method_lacks_argument(_raised(Rope(), fused_arg=None)) == (
        "its model code passes 'fused_arg' to Op, whose non-CUDA method forward_native() does not take it "
        "(its forward_cuda() does)")


def test_an_argument_no_method_takes_is_not_said_to_be_the_cuda_methods():
    assert method_lacks_argument(_raised(CudaNeither(), fused_arg=None)) is None
    assert method_lacks_argument(_raised(Rope(), other=None)) is None
    assert method_lacks_argument(ValueError("Op.forward_native() got an unexpected keyword argument 'fused_arg'")) is None


class Layer(torch.nn.Module):
    def __init__(self, reads_bias: bool):
        super().__init__()
        self.reads_bias = reads_bias
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.bias = torch.nn.Parameter(torch.randn(4))
        self.unused_zero = torch.nn.Parameter(torch.zeros(4))  # never loaded: not a finding

    def forward(self, x):
        return x @ self.weight + (self.bias if self.reads_bias else 0)


class SelfAttention(torch.nn.Module):  # its parameters are parity's backend's to read
    def __init__(self):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.randn(4))


class Model(torch.nn.Module):
    def __init__(self, reads_bias: bool):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(reads_bias), Layer(reads_bias)])
        self.attn = SelfAttention()

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return type("Out", (), {"next_token_logits": x, "hidden_states": None})()


def test_loaded_parameters_the_forward_never_reads_are_named_once_per_layer_group():
    torch.manual_seed(0)
    model, x = Model(reads_bias=False), torch.randn(2, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert unread_parameters(lambda: model(x), model) == ["layers.*.bias (of its Layer)"]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # every parameter restored


def test_a_forward_that_reads_every_loaded_parameter_has_none_unread():
    torch.manual_seed(0)
    model, x = Model(reads_bias=True), torch.randn(2, 4)
    assert unread_parameters(lambda: model(x), model) == []


def _missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named '{name}'", name=name)


def test_a_module_of_a_required_package_parity_leaves_out_is_parity_s_limit():
    """SGLang 0.5.15's DeepSeek module imports `cutlass`; its wheel requires nvidia-cutlass-dsl."""
    from parity.extract.engines.sglang.cpu_path import requirement_not_installed

    requires = ["torch==2.9.1", "nvidia-cutlass-dsl[cu13]==4.5.2", "pytest; extra == \"test\""]
    assert requirement_not_installed(_missing("cutlass"), "0.5.15", requires) == (
        "its model code imports 'cutlass', from nvidia-cutlass-dsl[cu13]==4.5.2, which sglang 0.5.15 requires and "
        "parity's CPU environment does not install (ModuleNotFoundError: No module named 'cutlass')")


def test_a_module_the_release_does_not_require_stays_the_engines_own():
    from parity.extract.engines.sglang.cpu_path import requirement_not_installed

    requires = ["nvidia-cutlass-dsl[cu13]==4.5.2"]
    assert requirement_not_installed(_missing("flash_mla"), "0.5.15", requires) is None  # no requirement names it
    extra_only = ["nvidia-cutlass-dsl; extra == \"test\""]
    assert requirement_not_installed(_missing("cutlass"), "0.5.15", extra_only) is None  # required by an extra only
    assert requirement_not_installed(_missing("json"), "0.5.15", ["json-tools"]) is None  # installed: another cause
    assert requirement_not_installed(ImportError("cannot import name 'x'"), "0.5.15", requires) is None
