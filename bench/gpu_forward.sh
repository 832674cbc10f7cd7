#!/usr/bin/env bash
# GPU tier of the forward (logits) parity check: the same comparison as tests/test_forward.py,
# with SGLang's default GPU attention backend (resolved by SGLang's own get_default_attn_backend
# for the GPU: fa3 on Hopper, trtllm_mha on B200, else flashinfer or triton) and bf16 throughout.
#
#   bench/gpu_forward.sh                 # uses .venv-gpu (created if missing)
#   WHEELS=/path/to/wheels bench/gpu_forward.sh   # offline machine: install from local wheels only
#   OUT=/some/dir bench/gpu_forward.sh   # where the log and the JSON figures go (default: gpu-forward-out/)
#
# Needs: an NVIDIA GPU with CUDA, Python >= 3.11. The CPU environment (.venv, CPU torch, sglang
# --no-deps) cannot run the GPU kernels, so this builds its own: CUDA torch, the full sglang
# 0.5.23 (sgl-kernel, flashinfer), speculators 0.9.0 and transformers 5.19.0. On a machine
# without network access every one of those must be present as a wheel in $WHEELS (several GB:
# torch + sgl-kernel + flashinfer alone are > 3 GB).
#
# Status: written and checked for syntax only; it has NOT been run (no CUDA machine was
# available when it was written). The CPU path it shares was verified; the GPU-only code is
# the release family adapter's `attention_backend` (parity/extract/engines/sglang/families/:
# the stand-in ModelRunner attributes the GPU backends read), `default_gpu_attention_backend`,
# and the target's pooled prefill (forward_side.py: Runtime). Expect to add an attribute or two
# there on first run.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-gpu-forward-out}
VENV=${VENV:-.venv-gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
log="$OUT/gpu_forward.log"
exec > >(tee "$log") 2>&1

if ! command -v nvidia-smi >/dev/null; then
    echo "gpu_forward: no nvidia-smi: this is the GPU tier; run it on a CUDA machine" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
    pip_args=()
    if [ -n "${WHEELS:-}" ]; then
        pip_args=(--no-index --find-links "$WHEELS")
    fi
    "$VENV/bin/python" -m pip install "${pip_args[@]}" --upgrade pip
    # the full sglang: its GPU kernels and default attention backends come with it
    "$VENV/bin/python" -m pip install "${pip_args[@]}" "sglang==0.5.23" "transformers==5.19.0"
    # speculators without its torchvision/torchaudio pins (they would replace the CUDA torch)
    "$VENV/bin/python" -m pip install "${pip_args[@]}" --no-deps "speculators==0.9.0" "hs-connectors==0.9.0"
    "$VENV/bin/python" -m pip install "${pip_args[@]}" "datasets<=5.1.0" loguru httpx huggingface-hub \
        pydantic-settings rich typer protobuf safetensors pytest
    "$VENV/bin/python" -m pip install "${pip_args[@]}" --no-deps -e .
fi

"$VENV/bin/python" - <<'EOF'
import torch, sglang, speculators, transformers
assert torch.cuda.is_available(), "torch has no CUDA here"
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
print("sglang", sglang.__version__, "speculators", speculators.__version__ if hasattr(speculators, "__version__") else "?",
      "transformers", transformers.__version__)
EOF

echo "== pytest -m 'parity and gpu' (tests/test_forward.py)"
start=$(date +%s)
set +e
"$VENV/bin/python" -m pytest tests/test_forward.py -m "parity and gpu" -q -p no:cacheprovider -rs
rc_tests=$?
set -e
echo "pytest exit $rc_tests in $(( $(date +%s) - start )) s"

echo "== parity forward on CUDA, bf16: the matched pair and three drifts, with figures"
start=$(date +%s)
set +e
"$VENV/bin/python" -m parity forward --fixture llama-8l --drift born-from --drift no-d2t \
    --drift norm_before_residual --dtype bfloat16 --device cuda --json > "$OUT/gpu_forward.json"
rc_cli=$?
set -e
echo "parity forward exit $rc_cli (1 expected: the drifts) in $(( $(date +%s) - start )) s"
"$VENV/bin/python" - "$OUT/gpu_forward.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("verdict", d["verdict"], "wall", d["wall_s"])
for r in d["results"]:
    logits = [s for s in r["stages"] if s["stage"] == "logits"]
    fd = r["first_divergence"]
    first = (fd["step"], fd["stage"]) if fd else None
    print(r["name"].ljust(22), r["verdict"].ljust(7), "first", first,
          "logits max|d|", ["%.2e" % s["max_abs"] for s in logits],
          "top-1", [s["top1"] for s in logits], "KL max", ["%.1e" % s["kl_max"] for s in logits],
          "attention", r["serving"].get("attention"))
EOF
exit $rc_tests
