"""Wall time of a full CPU forward-parity run per fixture architecture, and its overhead.

    .venv/bin/python bench/forward.py [--arch llama qwen3 deepseek-v3] [--drifts] [--repeat N]

For each architecture's bundled target (real depth, tiny widths, seeded weights) with a
seeded speculators draft and its exported served form (the `matched` case):

- full:  `forward_parity(...)`, i.e. both paths with every hook, the engine-side id
         solving, the stage tensors written and read back, the comparison and the
         rendered table;
- bare:  the two forwards alone: the same two processes, imports, model builds and
         forwards (target + every TTT step of the draft) with no hooks, no outputs, no
         solving, no comparison (ids already written into the served config);
- ratio: full / bare, the harness's overhead. Target: <= 2.

Both are run the same way (the two sides one after the other), each `--repeat` times;
the best time is kept. Also printed: where the bare time goes (imports and runtime
set-up, model builds, the forwards' own compute) and the matched case's largest
differences, which bound the tolerances in parity/forward/tolerances.py.
With `--drifts`, every injected drift is run too and its first diverging stage printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parity.forward.cases import ARCHS, DRIFTS, EXPECTED_STAGE, fixture_cases, fixture_target  # noqa: E402
from parity.forward.report import render_forward, render_summary  # noqa: E402
from parity.forward.run import forward_parity  # noqa: E402


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def bench_arch(arch: str, repeat: int, drifts: bool) -> dict:
    name = ARCHS[arch]
    target = fixture_target(name)
    cases = fixture_cases(target, ())  # builds (or reuses) the seeded draft before any timing
    fulls, bares = [], []
    out = None
    for _ in range(repeat):
        out, wall = timed(lambda: forward_parity(target, cases, parallel=False))
        render_forward(out["results"][0], name)  # the table is part of a run
        fulls.append(wall)
    bare_cases = [replace(c, solve_taps=None) for c in cases]  # ids were written by the full run
    bare = None
    for _ in range(repeat):
        bare, wall = timed(lambda: forward_parity(target, bare_cases, parallel=False, bare=True))
        bares.append(wall)
    res = out["results"][0]
    tt, st = bare["training"]["timings"], bare["serving"]["timings"]
    tv, sv = bare["training"]["variants"]["matched"], bare["serving"]["variants"]["matched"]
    compute = tt["target_forward"] + tv["forward_s"] + st["target_forward"] + sv["forward_s"]
    logits = [d for d in res.stages if d.stage == "logits"]
    states = [d for d in res.stages if d.stage not in ("logits", "vocab_mapping") and d.max_abs is not None]
    row = {
        "arch": arch, "fixture": name, "layers": target["num_hidden_layers"],
        "verdict": res.verdict, "full_s": min(fulls), "bare_s": min(bares),
        "ratio": min(fulls) / min(bares),
        "imports_s": tt["import"] + st["import_setup"],
        "builds_s": tt["target_build"] + st["target_build"],
        "compute_s": compute,
        "logits_max": max(d.max_abs for d in logits),
        "kl_max": max(d.kl_max for d in logits),
        "top1_min": min(d.top1 for d in logits),
        "state_max": max(d.max_abs for d in states),
        "state_rel": max(d.max_abs / max(d.ref_max, 1e-30) for d in states),
    }
    if drifts:
        dcases = fixture_cases(target, DRIFTS, matched=False)
        dout, dwall = timed(lambda: forward_parity(target, dcases))
        row["drifts"] = dout["results"]
        row["drifts_s"] = dwall
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", nargs="+", default=list(ARCHS), choices=list(ARCHS))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--drifts", action="store_true", help="also run every injected drift per architecture")
    args = ap.parse_args()
    rows = []
    for arch in args.arch:
        print(f"[bench] {arch} ...", file=sys.stderr, flush=True)
        rows.append(bench_arch(arch, args.repeat, args.drifts))
    print("forward-parity wall time per fixture architecture (CPU, fp32, 16 tokens, 3 TTT steps, best of "
          f"{args.repeat})\n")
    head = ("arch", "fixture", "layers", "verdict", "full s", "bare s", "ratio", "imports s", "builds s",
            "compute s", "logits max|d|", "KL max", "top-1", "state max|d| (rel)")
    table = [head] + [(r["arch"], r["fixture"], str(r["layers"]), r["verdict"], f"{r['full_s']:.1f}",
                       f"{r['bare_s']:.1f}", f"{r['ratio']:.2f}", f"{r['imports_s']:.1f}",
                       f"{r['builds_s']:.1f}", f"{r['compute_s']:.2f}", f"{r['logits_max']:.1e}",
                       f"{r['kl_max']:.1e}", f"{r['top1_min']:.0%}",
                       f"{r['state_max']:.1e} ({r['state_rel']:.1e})") for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    for t in table:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(t, widths)).rstrip())
    worst = max(r["ratio"] for r in rows)
    print(f"\n  harness overhead (full / two forwards alone): worst {worst:.2f} "
          f"-> {'OK' if worst <= 2 else 'OVER'} the <= 2 target")
    print("  bare s = the two sides' processes with imports, builds and forwards only; compute s = "
          "the forwards' own compute inside them")
    ok = worst <= 2 and all(r["verdict"] == "parity" for r in rows)
    for r in rows:
        if "drifts" in r:
            print(f"\n  injected drifts on {r['fixture']} ({r['drifts_s']:.1f} s for all):")
            print(render_summary(r["drifts"]))
            for d in r["drifts"]:
                got = (d.first_divergence.step, d.first_divergence.stage) if d.first_divergence else None
                if got != EXPECTED_STAGE[d.name]:
                    ok = False
                    print(f"  UNEXPECTED: {d.name} first diverged at {got}, expected {EXPECTED_STAGE[d.name]}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
