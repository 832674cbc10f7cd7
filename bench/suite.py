"""Where a test run's time goes: per test module, per extraction kind, and every extraction
computed more than once.

    python3 bench/suite.py run [PYTEST ARGS]     # e.g. run -m slow: runs ./dev test with the logs on
    python3 bench/suite.py report DIR            # the report of an earlier run's DIR

`run` runs `./dev test ARGS` with `PARITY_RUN_LOG` (parity.runlog: one line per child that
parity ran or answered from the reply cache, with the test that asked) and pytest's JUnit XML
(each test's seconds, set-up and tear-down included), both kept in a directory it names (or
`--out DIR`), then prints the report. `.ci/run` runs the slow tier this way, so every CI log
ends with the figures.

The report:
  - the run: tests, wall seconds, and the seconds of the tests summed (xdist runs them in
    parallel, so the sum exceeds the wall); with `run`, how busy the machine's cores were;
  - per test module: tests, seconds summed, the slowest test;
  - per extraction kind (the module a child ran: the SGLang, vLLM, speculators or SpecForge
    probe, a forward side, replay): how many were asked, computed (a child ran), served by the
    reply cache, how many distinct keys were computed, and the seconds the computed ones took;
  - how the computed ones ran: forked from a warm server, forked from a server they had to
    start (paying the imports), or a fresh process (no server, or a stale one);
  - every key computed more than once in the run, with the tests that computed it: the run's
    duplicated work (a child whose reply the cache could not store counts each time it ran).
A key is the reply cache's key (interpreter, parity's source, the module run, the request with
its paths named by contents, the environment variables that steer the child), or, for a child
the cache never keeps (a forward side), a digest of the module and request.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPUTED = {"stored", "not stored", "off", "uncached", "raised"}  # a child ran (or began to)


def read_log(path: Path) -> list[dict]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a killed writer
    return rows


def read_junit(path: Path) -> list[tuple[str, float, str]]:
    """(test id, seconds, outcome) for each test case."""
    out = []
    if not path.exists():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        module = cls.replace(".", "/") + ".py" if cls else "?"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = tag
        out.append((f"{module}::{name}", float(case.get("time") or 0), outcome))
    return out


def _module(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def cpu_times() -> tuple[float, float] | None:
    """(busy, all) seconds of every core of this machine since boot (Linux's /proc/stat); None
    where unknown."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return (sum(fields) - idle) / tick, sum(fields) / tick


def report(out: Path, wall: float | None = None, cpu: tuple[float, float] | None = None) -> str:
    runs = read_log(out / "runs.jsonl")
    tests = read_junit(out / "junit.xml")
    lines = []
    summed = sum(t for _, t, _ in tests)
    outcomes = Counter(o for _, _, o in tests)
    head = f"{len(tests)} tests ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))})"
    if wall is not None:
        head += f", {wall:.0f} s wall"
    lines += [head + f", {summed:.0f} s of tests summed"]
    if cpu is not None and cpu[1] > 0:  # the whole machine's, whoever used it
        lines.append(f"the cores were busy {100 * cpu[0] / cpu[1]:.0f}% of the run ({cpu[0]:.0f} of "
                     f"{cpu[1]:.0f} core-seconds; {os.cpu_count()} cores)")
    lines.append("")

    per_module: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for test_id, seconds, _ in tests:
        per_module[_module(test_id)].append((test_id, seconds))
    lines.append(f"{'test module':52} {'tests':>5} {'seconds':>8}  slowest")
    for module, cases in sorted(per_module.items(), key=lambda kv: -sum(s for _, s in kv[1])):
        total = sum(s for _, s in cases)
        if total < 1:
            continue
        name, slowest = max(cases, key=lambda c: c[1])
        lines.append(f"{module:52} {len(cases):>5} {total:>8.0f}  {slowest:.0f} s {name.split('::', 1)[1][:60]}")

    lines += ["", f"{'extraction kind (module run)':52} {'asked':>5} {'ran':>5} {'hits':>5} {'distinct':>8} {'seconds':>8}"]
    kinds: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        kinds[run["module"]].append(run)
    for kind, rows in sorted(kinds.items(), key=lambda kv: -sum(r["seconds"] for r in kv[1] if r["status"] in COMPUTED)):
        ran = [r for r in rows if r["status"] in COMPUTED]
        hits = sum(r["status"] == "hit" for r in rows)
        lines.append(f"{kind:52} {len(rows):>5} {len(ran):>5} {hits:>5} {len({r['key'] for r in ran}):>8} "
                     f"{sum(r['seconds'] for r in ran):>8.0f}")
    ran = [r for r in runs if r["status"] in COMPUTED]
    lines.append(f"{'all':52} {len(runs):>5} {len(ran):>5} {sum(r['status'] == 'hit' for r in runs):>5} "
                 f"{len({r['key'] for r in ran}):>8} {sum(r['seconds'] for r in ran):>8.0f}")

    lines += ["", f"{'how the computed ones ran (parity.forkserver)':52} {'runs':>5} {'seconds':>8} {'median':>8}"]
    how: dict[str, list[float]] = defaultdict(list)
    for run in ran:
        how[f"{run['module'].removeprefix('parity.').removeprefix('extract.')}: {run.get('how') or '?'}"].append(
            run["seconds"])
    for name, seconds in sorted(how.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"{name:52} {len(seconds):>5} {sum(seconds):>8.0f} {sorted(seconds)[len(seconds) // 2]:>8.1f}")

    # A child stopped before it answered (a Ctrl-C or kill test's, on purpose) computed nothing
    # another run could have shared: counted apart, never as a key computed twice.
    stopped = [r for r in ran if r["status"] == "raised"]
    by_key: dict[str, list[dict]] = defaultdict(list)
    for run in ran:
        if run["status"] != "raised":
            by_key[run["key"]].append(run)
    # Computed again for a reason: what the child read had changed since (a test editing an
    # installed file, a fixture rebuilt), or the test turned the cache off to run cold.
    again = [r for rows in by_key.values() for r in rows[1:]
             if "changed" in (r.get("why") or "") or r["status"] == "off"]
    twice = {k: [rows[0], *[r for r in rows[1:] if r not in again]] for k, rows in by_key.items()}
    twice = {k: v for k, v in twice.items() if len(v) > 1}
    lines += ["", f"stopped before they answered (interrupted or killed on purpose): {len(stopped)} runs, "
                  f"{sum(r['seconds'] for r in stopped):.0f} s",
              f"computed again on purpose (a file it read had changed, or the cache was off): {len(again)} "
                  f"runs, {sum(r['seconds'] for r in again):.0f} s",
              f"computed more than once: {len(twice)} keys, {sum(len(v) - 1 for v in twice.values())} "
              f"extra runs, {sum(sum(r['seconds'] for r in v[1:]) for v in twice.values()):.0f} s"]
    by_work: dict[str, set[str]] = defaultdict(set)
    for run in ran:
        by_work[run.get("work") or run["key"]].add(run["key"])
    renamed = {w: keys for w, keys in by_work.items() if len(keys) > 1}
    lines.append(f"the same request under other path names (the names enter the key: engines read them): "
                 f"{len(renamed)} requests, {sum(len(k) - 1 for k in renamed.values())} extra keys")
    for key, rows in sorted(twice.items(), key=lambda kv: -sum(r["seconds"] for r in kv[1][1:])):
        why = Counter(r["status"] for r in rows)
        lines.append(f"  {rows[0]['module']} ({rows[0]['env']}) x{len(rows)} [{', '.join(f'{n} {s}' for s, n in why.items())}] "
                     f"key {key[:20]}")
        for test in sorted({r["test"] or "(no test)" for r in rows})[:6]:
            lines.append(f"      {test}")
    return "\n".join(lines)


def run(pytest_args: list[str], out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "runs.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PARITY_RUN_LOG": str(log)}
    started, cpu_before = time.monotonic(), cpu_times()
    rc = subprocess.call([str(ROOT / "dev"), "test", *pytest_args, f"--junitxml={out / 'junit.xml'}",
                          "-o", "junit_duration_report=total"], env=env, cwd=ROOT)
    wall, cpu_after = time.monotonic() - started, cpu_times()
    cpu = (cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]) if cpu_before and cpu_after else None
    print(f"\n== where the time went (bench/suite.py, logs in {out}) ==")
    print(report(out, wall, cpu))
    return rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run ./dev test ARGS with the logs on, then report")
    r.add_argument("--out", type=Path, default=None, help="where the logs go (default: a new temp dir)")
    s = sub.add_parser("report", help="report an earlier run's directory")
    s.add_argument("dir", type=Path)
    args, rest = parser.parse_known_args()
    if args.cmd == "report":
        print(report(args.dir))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="parity-suite-"))
    return run(rest, out)


if __name__ == "__main__":
    sys.exit(main())
