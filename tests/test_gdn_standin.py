"""parity's CPU stand-ins for SGLang's gated-delta-net kernels (gdn_standin.py) and its shared-expert
gate (shared_gate_standin.py), each against transformers' own torch implementation of Qwen3-Next
(`fix_query_key_value_ordering`, `causal_conv1d_fn`, `torch_chunk_gated_delta_rule`,
`Qwen3NextRMSNormGated`, the sparse MoE block's shared-expert gate, and the whole
`Qwen3NextGatedDeltaNet` layer), and each injected fault of a stand-in (a missing gate, a wrong
decay, ...) puts the layer's output beyond what the identification accepts (identify.MATCH_RTOL)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import Qwen3NextConfig
from transformers.models.qwen3_next import modeling_qwen3_next as hf

from parity.extract.engines.sglang import gdn_standin as gdn
from parity.extract.engines.sglang import shared_gate_standin
from parity.extract.identify import MATCH_RTOL, rel_err
from parity.extract.standins import StandInUsed

SEQS = [5, 7]  # two requests of one EXTEND batch


def _config():
    return Qwen3NextConfig(hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                           linear_value_head_dim=8, linear_conv_kernel_dim=4, num_hidden_layers=4,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_experts=4,
                           num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                           vocab_size=64)


@pytest.fixture(scope="module")
def layer():
    torch.manual_seed(0)
    module = hf.Qwen3NextGatedDeltaNet(_config(), layer_idx=0).eval()
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if name != "A_log" else 1.0))
    return module


class _Layer:
    """What SGLang's RadixLinearAttention hands the backend, for transformers' layer."""

    def __init__(self, m):
        self.num_q_heads = self.num_k_heads = m.num_k_heads
        self.num_v_heads, self.head_q_dim, self.head_k_dim, self.head_v_dim = (m.num_v_heads, m.head_k_dim,
                                                                              m.head_k_dim, m.head_v_dim)
        self.q_dim = self.k_dim = m.key_dim
        self.v_dim = m.value_dim
        self.conv_weights, self.bias, self.activation = m.conv1d.weight.squeeze(1), None, m.activation
        self.A_log, self.dt_bias, self.lower_bound = m.A_log, m.dt_bias, None


class _Mode:
    name = "EXTEND"

    def is_extend(self):
        return True

    def is_target_verify(self):
        return False


class _Batch:
    forward_mode = _Mode()
    extend_seq_lens_cpu = SEQS
    extend_prefix_lens_cpu = [0, 0]


def _standin_layer(m, x):
    """Qwen3GatedDeltaNet.forward's sequence on the stand-ins: in_proj, split, backend, gated norm, out_proj."""
    mixed_qkv, z, b, a = gdn.split_qkvzba(m.in_proj_qkvz(x), m.in_proj_ba(x), m.num_k_heads, m.num_v_heads,
                                          m.head_k_dim, m.head_v_dim)
    core = gdn.linear_attention_extend(_Layer(m), _Batch(), mixed_qkv, a, b)
    core = gdn.gated_rms_norm(core.reshape(-1, m.head_v_dim), z.reshape(-1, m.head_v_dim), m.norm.weight,
                              m.norm.variance_epsilon, "silu")
    return m.out_proj(core.reshape(x.shape[0], -1))


def _reference_layer(m, x):
    out, start = [], 0
    for n in SEQS:  # transformers runs one request per batch row, from an empty state
        out.append(m(x[start:start + n].unsqueeze(0))[0])
        start += n
    return torch.cat(out, 0)


@pytest.fixture(scope="module")
def tokens():
    torch.manual_seed(1)
    return torch.randn(sum(SEQS), 32)


@torch.no_grad()
def test_the_whole_layer_on_the_stand_ins_is_transformers_gated_delta_net(layer, tokens):
    assert rel_err(_standin_layer(layer, tokens), _reference_layer(layer, tokens)) < 1e-5


@torch.no_grad()
def test_the_split_is_transformers_ordering(layer, tokens):
    qkvz, ba = layer.in_proj_qkvz(tokens), layer.in_proj_ba(tokens)
    mixed_qkv, z, b, a = gdn.split_qkvzba(qkvz, ba, 2, 4, 8, 8)
    q, k, v, rz, rb, ra = layer.fix_query_key_value_ordering(qkvz.unsqueeze(0), ba.unsqueeze(0))
    assert torch.equal(mixed_qkv, torch.cat([x[0].reshape(tokens.shape[0], -1) for x in (q, k, v)], -1))
    assert torch.equal(z, rz[0]) and torch.equal(b, rb[0]) and torch.equal(a, ra[0])


@torch.no_grad()
def test_the_conv_is_transformers_causal_conv1d(layer):
    torch.manual_seed(2)
    x, w = torch.randn(sum(SEQS), 12), torch.randn(12, 4)
    ours = gdn.causal_conv1d(x, w, SEQS)
    ref = torch.cat([hf.causal_conv1d_fn(x[s:s + n].T.unsqueeze(0), w, None, activation="silu")[0].T
                     for s, n in ((0, 5), (5, 7))])
    assert rel_err(ours, ref) < 1e-6


@torch.no_grad()
def test_the_delta_rule_is_transformers_chunked_rule():
    torch.manual_seed(3)
    t = sum(SEQS)
    q, k, v = torch.randn(1, t, 2, 8), torch.randn(1, t, 2, 8), torch.randn(1, t, 4, 8)
    g, beta = -torch.rand(1, t, 4) * 2, torch.rand(1, t, 4)
    ours = gdn.gated_delta_rule(q, k, v, g, beta, SEQS)
    ref, start = [], 0
    for n in SEQS:
        sl = slice(start, start + n)
        out, _ = hf.torch_chunk_gated_delta_rule(q[:, sl].repeat_interleave(2, 2), k[:, sl].repeat_interleave(2, 2),
                                                 v[:, sl], g=g[:, sl], beta=beta[:, sl], initial_state=None,
                                                 output_final_state=False, use_qk_l2norm_in_kernel=True)
        ref.append(out)
        start += n
    assert rel_err(ours, torch.cat(ref, 1)) < 1e-5


@torch.no_grad()
def test_the_gated_norm_is_transformers_gated_rms_norm():
    torch.manual_seed(4)
    norm = hf.Qwen3NextRMSNormGated(8, eps=1e-6)
    norm.weight.data = torch.randn(8)
    x, z = torch.randn(10, 8), torch.randn(10, 8)
    assert rel_err(gdn.gated_rms_norm(x, z, norm.weight, 1e-6, "silu"), norm(x, z)) < 1e-6


@torch.no_grad()
def test_the_shared_expert_gate_is_transformers_gate():
    torch.manual_seed(5)
    gate = torch.nn.Linear(32, 1, bias=False)
    h, shared, routed = torch.randn(6, 32), torch.randn(6, 32), torch.randn(6, 32)
    out = routed.clone()
    shared_gate_standin.gate_sigmoid_mul(h, gate.weight.squeeze(0), shared, out, do_add=True)
    assert rel_err(out, routed + F.sigmoid(gate(h)) * shared) < 1e-6  # Qwen3NextSparseMoeBlock's gate


FAULTS = {  # stand-in -> an injected fault of it
    "split_qkvzba": lambda orig: lambda *a: (lambda q, z, b, a_: (q, z, a_, b))(*orig(*a)),  # b and a swapped
    "causal_conv1d": lambda orig: lambda x, w, s, bias=None, activation="silu": orig(x, w, s, bias, None),  # no SiLU
    "gdn_gates": lambda orig: lambda A_log, a, b, dt_bias: (lambda g, beta: (g / 2, beta))(
        *orig(A_log, a, b, dt_bias)),  # a wrong decay
    "gated_delta_rule": lambda orig: lambda q, k, v, g, beta, s: orig(q, k, v, g, torch.ones_like(beta), s),  # no beta
    "gated_rms_norm": lambda orig: lambda x, z, w, eps, act="swish": orig(x, torch.full_like(z, 30.0), w, eps,
                                                                          act),  # the output gate missing
}


@pytest.mark.parametrize("name", sorted(FAULTS))
@torch.no_grad()
def test_an_injected_fault_of_each_stand_in_is_no_state_of_the_model(layer, tokens, name, monkeypatch):
    monkeypatch.setattr(gdn, name, FAULTS[name](getattr(gdn, name)))
    assert rel_err(_standin_layer(layer, tokens), _reference_layer(layer, tokens)) > MATCH_RTOL


def test_the_shared_gate_fault_is_caught():
    torch.manual_seed(6)
    h, w, shared = torch.randn(6, 32), torch.randn(32), torch.randn(6, 32)
    out, ungated = torch.zeros(6, 32), shared.clone()  # the fault: the gate missing
    shared_gate_standin.gate_sigmoid_mul(h, w, shared, out, do_add=False)
    assert rel_err(ungated, out) > MATCH_RTOL


def test_what_the_stand_ins_do_not_compute_raises():
    class Decode(_Mode):
        name = "DECODE"

        def is_extend(self):
            return False

    class Cached(_Batch):
        extend_prefix_lens_cpu = [3, 0]

    class DecodeBatch(_Batch):
        forward_mode = Decode()

    layer = type("L", (), {"lower_bound": None})()
    for batch, words in ((DecodeBatch(), "DECODE batch"), (Cached(), "cached prefix")):
        with pytest.raises(StandInUsed, match=words):
            gdn.linear_attention_extend(layer, batch, torch.zeros(12, 4), None, None)
    with pytest.raises(StandInUsed, match="conv1d bias"):
        gdn.causal_conv1d(torch.zeros(3, 2), torch.zeros(2, 4), [3], bias=torch.zeros(2))
    with pytest.raises(StandInUsed, match="gated norm activation"):
        gdn.gated_rms_norm(torch.zeros(2, 4), torch.zeros(2, 4), torch.ones(4), 1e-6, "gelu")
