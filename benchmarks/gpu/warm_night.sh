#!/usr/bin/env bash
# A team's repository of eight to ten cases on a GPU, nights and a bisect with warm workers, each timed.
# perfci is the installed tool (the wheel carried in .whl/; nothing of perfci's checkout on the path).
#
# The repository (gemmlab, from examples/kernel-repo): its tiled Triton GEMM at three shapes, an
# autotuned Triton GEMM (@triton.autotune over four close configs) at three shapes, torch.matmul
# at two, and (LIB=flaggems) FlagGems' mm at two; fp16. A plant makes the tiled GEMM walk part of
# K again with a zero multiplier (slower, still correct).
#
#   MODE=bisect     two `perfci run gemm` (each case's phases in run-*.jsonl), then eight commits, the
#                   third a +20% plant (K // 5); `perfci bisect HEAD~8 HEAD --suite gemm --case ...`
#                   timed: the warm-worker bisect alone
#   MODE=nights     night 1 (recorded), then NIGHTS-1 docs-only commits (NIGHTS default 3), each
#                   followed by a night (unchanged nights: each night's stages and seconds)
#   MODE=red        night 1, then eight commits whose third is a plant (PLANT, default K // 10: 7 more
#                   of the 1024-K GEMMs' 64 K-steps; K // 32: 2 more, ~+3%), night 2: red, confirm,
#                   bisect, the culprit; the team's repository checked as before.
#                   PLANT="(K // 40) * (K >= 4096)": the +3% plant on one case, the tiled GEMM's
#                   64x4096x4096 (7 more of its 256 K-steps, +2.7% work; nothing where K < 4096)
#   MODE=flip       as MODE=nights with FLIP=1: nights of docs-only commits, no change to any kernel;
#                   each night says what compare and confirm called the autotuned cases (config-flip?)
#   MODE=aa         AA_SESSIONS (default 4) docs-only commits, each followed by `perfci confirm HEAD~1 HEAD
#                   --suite gemm --device cuda --budget AA_BUDGET` (default 100): identical code, a new
#                   pair of worktrees and workers each session; every case regressed or improved is false
#   MODE=build      the team's repository only (committed), its suite listed by `perfci run
#                   --list`: no GPU needed, no night
#   LIB            flaggems (default): FlagGems' mm (flag_gems.ops.mm.mm, autotuned by its libtuner at
#                  first call) at 64x4096x4096 and 2048x2048x2048, a Backend `flaggems_mm` in
#                  kernels/perf.py that imports flag_gems in prepare (FlagGems imports only where
#                  it finds a GPU); its time includes mm's allocation of C. The libtuner keeps its
#                  picks in ~/.flaggems/config_cache/*.db, so only the machine's first process tunes
#                  (22 configs of the H200's tune_configs.yaml, warmup 5, rep 10 ms); none: the eight
#                  cases without it
#   FLIP           1: the autotuned GEMM races two configs at 2048x2048x2048 (64x128 w4 and 128x128
#                  w8, within 0.2% of each other on the H200) with a short benchmark (do_bench
#                  warmup 1 ms, rep 5 ms), so processes pick differently; 0 (default, every mode but
#                  flip): four configs, triton's default benchmark, as the earlier figures
#   NIGHT_ARGS     more `perfci nightly` options (default: none, the workflow's defaults)
#   BUDGET_S       the whole script's seconds (default 560)
#
# Needs the perfci wheel and gitpython's in .whl/ (python3 -m pip wheel --no-deps --no-build-isolation
# -w .whl .; pip download GitPython gitdb smmap); LIB=flaggems also flag_gems 5.0.2's and its needs'
# (sqlalchemy, greenlet, PyYAML, packaging: cp312 manylinux wheels where compiled). Usage, from
# perfci's repository root:
#   MODE=bisect bash benchmarks/gpu/warm_night.sh
# Outputs in $OUT/r: log.txt, each night's nN/ (verdict.json, summary.md) and nN.err, bisect.json/.err.
source benchmarks/gpu/setup.sh
MODE=${MODE:-bisect}; NIGHT_ARGS=${NIGHT_ARGS:-}; LIB=${LIB:-flaggems}
FLIP=${FLIP:-0}; [[ $MODE == flip ]] && FLIP=1
case $MODE in bisect | nights | red | flip | build | aa) ;; *) echo "warm_night: MODE=$MODE is not one of bisect nights red flip build aa" >&2; exit 2 ;; esac
case $LIB in flaggems | none) ;; *) echo "warm_night: LIB=$LIB is not one of flaggems none" >&2; exit 2 ;; esac
TEAM=/tmp/gemmlab
rm -rf "$TEAM" /tmp/gemmlab-perf-history "$R"/n[0-9]*
export PYTHONPATH=/tmp/site  # the installed tool only: the team's `kernels` must be the one imported
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} TRITON_INTERPRET=0
read -r -a EXTRA <<< "$NIGHT_ARGS"
demo_git

# team_repo DIR: gemmlab in DIR, committed: kernels/tuned.py (FLIP: the race-prone variant), its
# Backends in kernels/perf.py (LIB=flaggems: flaggems_mm too), bench/suites/gemm.toml.
team_repo() {
  cp -r examples/kernel-repo "$1" && cd "$1" || return 2
  cat > kernels/tuned.py <<'PY'
"""gemmlab's autotuned GEMM: @triton.autotune picks one of four close configs at first call."""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
             triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4, num_stages=3),
             triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
             triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3)],
    key=["M", "N", "K"])
@triton.jit
def _tuned_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b, out):
    m, k = a.shape
    n = b.shape[1]
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
    _tuned_kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        out.stride(0), out.stride(1))
    return out
PY
  if ((FLIP)); then  # the race, in the base repository from night 1 on: no commit touches it
    python3 - <<'PY'
path = "kernels/tuned.py"
src = open(path).read()
old = '    key=["M", "N", "K"])\n'
new = '''\
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": _race_at_2048},
    do_bench=lambda fn, quantiles: triton.testing.do_bench(fn, warmup=1, rep=5, quantiles=quantiles))
'''
race = '''

def _race_at_2048(configs, named_args, **kwargs):
    """At 2048x2048x2048 only the two configs the H200 timed within 0.2% of each other (64x128 w4,
    128x128 w8): with a 5 ms benchmark each process's pick is close to a coin's."""
    if (named_args["M"], named_args["N"], named_args["K"]) != (2048, 2048, 2048):
        return configs
    return [c for c in configs if c.kwargs["BLOCK_N"] == 128]
'''
head = "import triton.language as tl\n"
assert old in src and head in src
src = src.replace(old, new).replace(head, head + race, 1)
src = src.replace("picks one of four close configs at first call.",
                  "picks one of four close configs at first call;\nat 2048x2048x2048 "
                  "one of two that tie, on a short benchmark (the planted config flip).")
open(path, "w").write(src)
PY
  fi
  cat >> kernels/perf.py <<'PY'


@backend("gemmlab_tuned", description="gemmlab's autotuned Triton GEMM", dtypes=("fp16",))
def gemmlab_tuned(spec, device, seed):
    import torch

    from kernels.tuned import matmul

    a, w, _, out_dtype = gemm_inputs(spec, device, seed)
    b = w.t().contiguous()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    return Prepared(run=lambda: matmul(a, b, out), output=out, reference=reference(a, w),
                    tolerance=TOLERANCE[spec.dtype], poison=poisoner(out))


BACKENDS = [gemmlab_matmul, gemmlab_tuned]
PY
  if [[ $LIB == flaggems ]]; then
    cat >> kernels/perf.py <<'PY'


@backend("flaggems_mm", description="FlagGems' Triton mm (flag_gems.ops.mm.mm), its libtuner autotuning at "
         "first call", dtypes=("fp16", "bf16"))
def flaggems_mm(spec, device, seed):
    # FlagGems imports only where it finds a GPU: imported here, in the measuring process, so that
    # the suite is checked anywhere; perfci's wrapper for plain callables gives it its inputs
    # (B the (K, N) view of the weight), the correctness gate and the poison.
    if device.type != "cuda":
        raise Unsupported("FlagGems runs on a GPU only")
    from flag_gems.ops.mm import mm

    return gemm(mm, "flaggems_mm").prepare(spec, device, seed)


BACKENDS = [*BACKENDS, flaggems_mm]
PY
    sed -i 's/^from perfci.kernel import TOLERANCE, Prepared, backend, gemm_inputs, poisoner, reference$/from perfci.kernel import TOLERANCE, Prepared, Unsupported, backend, gemm, gemm_inputs, poisoner, reference/' kernels/perf.py
    grep -q "Unsupported, backend, gemm," kernels/perf.py || { echo "team_repo: kernels/perf.py's import line moved" >&2; return 2; }
  fi
  local cases=("gemmlab_matmul 1024 1024 1024" "gemmlab_matmul 2048 2048 1024" "gemmlab_matmul 64 4096 4096"
               "gemmlab_tuned 1024 1024 1024" "gemmlab_tuned 2048 2048 2048" "gemmlab_tuned 64 4096 4096"
               "torch_matmul 2048 2048 2048" "torch_matmul 64 4096 4096")
  [[ $LIB == flaggems ]] && cases+=("flaggems_mm 64 4096 4096" "flaggems_mm 2048 2048 2048")
  local t kern m n k
  {
    printf 'name = "gemm"\ndescription = "gemmlab: tiled, autotuned%s and torch GEMMs, fp16"\n' \
      "$([[ $LIB == flaggems ]] && echo ", FlagGems'")"
    printf 'devices = ["cuda", "cpu"]\ndtype = "fp16"\n'
    for t in "${cases[@]}"; do
      read -r kern m n k <<< "$t"
      printf '\n[[cases]]\nkernel = "%s"\nM = %s\nN = %s\nK = %s\n' "$kern" "$m" "$n" "$k"
    done
  } > bench/suites/gemm.toml
  printf '__pycache__/\n' > .gitignore
  git init -q -b main && git add -A && git commit -qm "gemmlab: tiled, autotuned and torch GEMMs and their nightly suite"
}

night() {  # night N: perfci nightly gemm in the team's repository, as the workflow runs it
  local n=$1 s=$SECONDS rc=0
  echo "== night $n at $(git rev-parse --short HEAD)"
  timeout "$(left)" python3 -m perfci nightly gemm --out "$R/n$n" --device cuda "${EXTRA[@]}" \
    > "$R/n$n.out" 2> "$R/n$n.err" || rc=$?
  echo "night $n: exit $rc [$((SECONDS - s)) s, at $((SECONDS - T0)) s]"
  [[ -f $R/n$n/verdict.json ]] && python3 - "$R/n$n" <<'PY'
import json, sys
v = json.load(open(sys.argv[1] + "/verdict.json"))
print(f"  exit {v['exit_code']}: {v['verdict']}")
cases = v.get("cases") or []
confirmed = {(c["kernel"], c["shape"], c["dtype"]): c for c in v.get("confirmed") or []}
print(f"  flagged: {', '.join(' '.join(k) for k in v.get('flagged') or []) or 'none'}")
for c in cases:
    if c["verdict"] == "config-flip":
        print(f"  config-flip: {c['kernel']} {c['shape']} {c['dtype']}: {c['reason']}")
for c in v.get("confirmed") or []:
    ratio = f"{c['ratio']:.3f}" if c.get("ratio") is not None else "-"
    why = f": {c['reason']}" if c["verdict"] == "config-flip" else ""
    print(f"  confirmed: {c['kernel']} {c.get('shape', '')} {c['verdict']} {ratio} ({c.get('rounds', '')} rounds){why}")
# the autotuned cases (gemmlab_tuned, flaggems_mm), each night: what compare and confirm called them
for c in cases:
    if c["kernel"] in ("gemmlab_tuned", "flaggems_mm"):
        conf = confirmed.get((c["kernel"], c["shape"], c["dtype"]))
        told = f"{conf['verdict']} ({conf.get('reason', '')[:80]})" if conf else "-"
        print(f"  autotuned {c['kernel']} {c['shape']}: compare {c['verdict']}; confirm {told}")
if v.get("culprit"):
    print(f"  culprit: {v['culprit']['sha'][:12]} {v['culprit']['subject']}")
for st in v["stages"]:
    print(f"  stage {st['name']}: {st.get('seconds', '')} s: {st.get('detail', '')[:200]}")
for note in v.get("notes", []):
    print(f"  note: {note[:200]}")
PY
}

plant() {  # plant EXPR: the tiled GEMM walks EXPR more of K, multiplied by zero
  python3 - "$1" <<'PY'
import sys
path = "kernels/gemm.py"
src = open(path).read()
end = "    c = acc.to(c_ptr.dtype.element_ty)\n"
plant = f"""\
    for k0 in range(0, {sys.argv[1]}, BLOCK_K):  # walk K again, multiplied by zero
        k = (k0 % K) + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += 0.0 * tl.dot(a, b)
"""
assert end in src
open(path, "w").write(src.replace(end, plant + end))
PY
  git add -A && git commit -qm "gemm: walk K again" && echo "planted: $(git rev-parse --short HEAD) ($1)"
}

eight_commits() {  # eight commits, the third the plant
  local i
  for i in 1 2; do printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"; done
  plant "$1"
  for i in 4 5 6 7 8; do printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"; done
}

state() {
  git rev-parse HEAD; git branch --show-current; git status --porcelain --untracked-files=all
  git diff --cached --stat; git stash list; git worktree list
}

team_repo "$TEAM" || exit 2
{
  python3 -c "import perfci, torch, triton; print('perfci', perfci.__file__, 'torch', torch.__version__, 'triton', triton.__version__)"
  echo "MODE=$MODE LIB=$LIB FLIP=$FLIP: $(grep -c '^\[\[cases\]\]' bench/suites/gemm.toml) cases"
  if [[ $LIB == flaggems && $MODE != build ]]; then  # FlagGems imports only where it finds a GPU
    python3 -c "import flag_gems; print('flag_gems', flag_gems.__version__, flag_gems.__file__)"
  fi
  case $MODE in
    build)
      python3 -m perfci run gemm --list --device cuda
      ;;
    bisect)
      # where a fresh process's time goes, per case (phases in the JSON log), cold then warm caches
      measure run-cold 120 gemm --device cuda
      measure run-warm 120 gemm --device cuda
      eight_commits "K // 5"
      state > "$R/state-before.txt"
      s=$SECONDS; rc=0
      timeout "$(left)" python3 -m perfci bisect HEAD~8 HEAD --suite gemm --case 'gemmlab_matmul,1024x1024x1024,fp16' \
        --device cuda --format json > "$R/bisect.json" 2> "$R/bisect.err" || rc=$?
      echo "bisect: exit $rc [$((SECONDS - s)) s]"
      tail -n 25 "$R/bisect.err"
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['status'], (r.get('culprit') or {}).get('sha','')[:12], (r.get('culprit') or {}).get('subject',''))" "$R/bisect.json"
      state > "$R/state-after.txt"; diff "$R/state-before.txt" "$R/state-after.txt" && echo "repository as before"
      ;;
    aa)
      for ((i = 1; i <= ${AA_SESSIONS:-4}; i++)); do
        printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"
        s=$SECONDS; rc=0
        timeout "$(left)" python3 -m perfci confirm HEAD~1 HEAD --suite gemm --device cuda --budget "${AA_BUDGET:-100}" \
          --format json > "$R/aa$i.json" 2> "$R/aa$i.err" || rc=$?
        echo "A/A session $i: exit $rc [$((SECONDS - s)) s]"
        python3 - "$R/aa$i.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"  no report: {err}")
print(f"  {r['summary']['rounds']} rounds, {r['summary']['seconds']} s")
for c in r["cases"]:
    ratio = f"{c['ratio']:.4f} [{c['ci_low']:.4f}, {c['ci_high']:.4f}]" if c["ratio"] is not None else "-"
    false = "  FALSE CALL" if c["verdict"] in ("regressed", "improved") else ""
    print(f"  {c['kernel']} {c['shape']} {c['verdict']} {ratio} ({c['rounds']} rounds){false}")
PY
      done
      ;;
    nights | flip)
      night 1
      for ((i = 2; i <= ${NIGHTS:-3}; i++)); do
        printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"; night "$i"
      done
      ;;
    red)
      night 1
      eight_commits "${PLANT:-K // 10}"
      echo "work in progress" > USAGE.md && git stash push -q -m "team: an idea for later"
      echo "notes" > scratch.txt
      state > "$R/state-before.txt"
      night 2
      state > "$R/state-after.txt"; diff "$R/state-before.txt" "$R/state-after.txt" && echo "repository as before"
      ;;
  esac
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | tee "$R/log.txt"
cd / && pack
