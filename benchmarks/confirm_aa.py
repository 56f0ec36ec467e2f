"""Does ``perfci confirm`` stay quiet on identical code, session after session, on this CPU machine?

What it validates: ``perfci confirm HEAD~1 HEAD --suite S --device cpu`` where HEAD~1 -> HEAD
changes only a README. Each session gets a docs-only commit of its own, so every session is a new
pair of worktrees, new warm workers and new processes: an A/A comparison at the sample sizes a
night really uses. A case called ``regressed`` or ``improved`` is a false call. The repositories,
each built from scratch in a temporary folder, are a kernel team's as perfci meets them:

- ``torch``: a plain PyTorch blocked GEMM (``kernels.gemm:matmul``, by import path) and
  ``torch:matmul``, fp32, at 16x64x64 and 64x64x64: the cases issue "Verdicts that hold across
  processes" saw called changed in 6 of 8 sessions;
- ``triton``: examples/kernel-repo (a team's Triton GEMM, through the interpreter);
- ``smoke``: a clone of this checkout, its built-in smoke suite.

The stated error rate: confirm spends alpha = 0.05 of false discoveries across a session's cases
(Benjamini-Hochberg within each look, alpha spent over the looks), so at most about 5% of sessions
may call any unchanged case changed; the count of sessions with a false call is the figure.

    python benchmarks/confirm_aa.py --kind torch --sessions 10 --budget 150 --out DIR
    python benchmarks/confirm_aa.py --table DIR/sessions.jsonl   # the table of a results file

One JSON line a session (its verdicts, rounds, seconds, exit code) is appended to
``DIR/sessions.jsonl`` as it ends, with confirm's full stderr and JSON under ``DIR/``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

GEMM = '''"""A plain PyTorch blocked GEMM: what a team writes before it writes a kernel."""
import torch


def matmul(a, b):
    m, k = a.shape
    n = b.shape[1]
    out = torch.zeros(m, n, dtype=a.dtype)
    for k0 in range(0, k, 16):
        out += a[:, k0:k0 + 16] @ b[k0:k0 + 16, :]
    return out
'''

SUITE = '''name = "s"
devices = ["cpu"]
dtype = "fp32"

[[cases]]
kernel = ["kernels.gemm:matmul", "torch:matmul"]
M = [16, 64]
N = 64
K = 64
'''

PYPROJECT = '''[project]
name = "aa"
version = "0.1.0"

[tool.perfci]
suites = "."
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(kind: str, where: Path) -> tuple[Path, str]:
    """The repository and the suite confirm measures there."""
    repo = where / "repo"
    if kind == "torch":
        (repo / "kernels").mkdir(parents=True)
        (repo / "kernels" / "__init__.py").write_text("")
        (repo / "kernels" / "gemm.py").write_text(GEMM)
        (repo / "s.toml").write_text(SUITE)
        (repo / "pyproject.toml").write_text(PYPROJECT)
        suite = "s"
    elif kind == "triton":
        shutil.copytree(HERE / "examples" / "kernel-repo", repo)
        suite = "gemm"
    elif kind == "smoke":
        subprocess.run(["git", "clone", "-q", str(HERE), str(repo)], check=True)
        shutil.rmtree(repo / ".git")
        suite = "smoke"
    else:
        raise SystemExit(f"--kind {kind}: torch, triton or smoke")
    (repo / "README.md").write_text("docs\n")
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "-c", "user.name=aa", "-c", "user.email=aa@example.com", "add", "-A")
    git(repo, "-c", "user.name=aa", "-c", "user.email=aa@example.com", "commit", "-qm", "start")
    return repo, suite


def docs_commit(repo: Path, n: int, plant: int = 0) -> None:
    """A docs-only commit; with ``plant`` (torch only), HEAD~1 is left as it was and HEAD's blocked GEMM does
    ``plant`` extra in-place adds of zero after its loop (each a few percent of its time, measured)."""
    (repo / "README.md").write_text(f"docs, edit {n}\n")
    gemm = repo / "kernels" / "gemm.py"
    if plant and gemm.exists():
        gemm.write_text(GEMM.replace("    return out\n", "    out.add_(0.0)\n" * plant + "    return out\n"))
    git(repo, "-c", "user.name=aa", "-c", "user.email=aa@example.com", "commit", "-qam", f"docs {n}")


def session(repo: Path, suite: str, budget: float | None, out: Path, n: int, extra: list[str],
            perfci: Path | None = None, plant: int = 0) -> dict:
    cmd = [sys.executable, "-m", "perfci", "confirm", "HEAD~1", "HEAD", "--suite", suite, "--device", "cpu",
           "--format", "json", *(["--budget", f"{budget:g}"] if budget else []), *extra]
    env = dict(os.environ, PYTHONPATH=str(perfci)) if perfci else None
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - started
    (out / f"confirm-{n:03d}.stderr").write_text(proc.stderr)
    (out / f"confirm-{n:03d}.json").write_text(proc.stdout)
    row = {"session": n, "exit": proc.returncode, "seconds": round(seconds, 1), "command": " ".join(cmd[2:])}
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["error"] = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return row
    row["rounds"] = report["summary"]["rounds"]
    row["cases"] = [{"case": " ".join(str(c.get(k)) for k in ("kernel", "shape", "dtype")),
                     "verdict": c["verdict"], "ratio": c["ratio"], "ci": [c["ci_low"], c["ci_high"]],
                     "rounds": c["rounds"]} for c in report["cases"]]
    row["false"] = [c["case"] for c in row["cases"] if c["verdict"] in ("regressed", "improved")
                    and not (plant and c["case"].startswith("kernels.gemm:matmul") and c["verdict"] == "regressed")]
    row["found"] = [c["case"] for c in row["cases"] if plant and c["case"].startswith("kernels.gemm:matmul")
                    and c["verdict"] == "regressed"]
    return row


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    verdicts = Counter(c["verdict"] for r in rows for c in r.get("cases", ()))
    false_sessions = sum(1 for r in rows if r.get("false"))
    errors = sum(1 for r in rows if "error" in r)
    found = sum(1 for r in rows if r.get("found"))
    out = [f"{len(rows)} sessions: {false_sessions} with a false call, {errors} without a report; "
           f"case verdicts {dict(verdicts)}" + (f"; the plant found in {found}" if rows and rows[0].get("plant") else "")]
    for r in rows:
        calls = ", ".join(f"{c['case']} {c['verdict']} x{c['ratio']:.3f}" if c["ratio"] else
                          f"{c['case']} {c['verdict']}" for c in r.get("cases", ()))
        out.append(f"  {r['session']:3d}: exit {r['exit']}, {r.get('rounds', '-')} rounds, {r['seconds']:.0f} s"
                   f"{'  FALSE: ' + ', '.join(r['false']) if r.get('false') else ''}  [{calls or r.get('error')}]")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", default="torch")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--budget", type=float, default=None, help="confirm's --budget (default: confirm's own)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print the table of a sessions.jsonl and exit")
    ap.add_argument("--plant", type=int, default=0, help="torch only: HEAD's GEMM does N extra in-place adds "
                    "of zero (a real slowdown of a few percent a add): the same sessions must find it")
    ap.add_argument("--perfci", type=Path, help="a checkout of another perfci to run (its folder goes on "
                    "PYTHONPATH): the same sessions on an earlier revision")
    ap.add_argument("extra", nargs="*", help="more confirm options, after --")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if args.out is None:
        ap.error("--out DIR")
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "sessions.jsonl"
    with tempfile.TemporaryDirectory(prefix="perfci-aa-") as tmp:
        repo, suite = make_repo(args.kind, Path(tmp))
        for n in range(args.sessions):
            if args.plant:  # HEAD~1: the plain GEMM again, HEAD: the planted one
                (repo / "kernels" / "gemm.py").write_text(GEMM)
                git(repo, "-c", "user.name=aa", "-c", "user.email=aa@example.com", "commit", "-qam", f"plain {n}",
                    "--allow-empty")
            docs_commit(repo, n, args.plant)
            row = {"kind": args.kind, "perfci": str(args.perfci or "installed"), "plant": args.plant,
                   **session(repo, suite, args.budget, args.out, n, args.extra, args.perfci, args.plant)}
            with results.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
