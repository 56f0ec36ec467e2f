# Named kernel changes ("plants") for the demos, sourced. `plant NAME` edits ./kernels of the
# current directory (a throwaway copy, never this checkout), marks each edited line `# plant`,
# and fails (exit 2) when the edit matched nothing: a demo whose plant changed nothing proves
# nothing, and a table that moved since must not pass for a measured change.
#
#   group      GROUP_M 8 -> 1 on the sm_90 16-bit large-M row (the tiled and persistent GEMMs
#              read it): the grouped launch order undone, registers and shared memory unchanged
#   spill      the same row at 4 warps instead of 8: spills on sm_90
#   stages     the sm_90 16-bit M <= 64 row at 6 stages instead of 4 (144 KiB of shared memory)
#   warps8     split-K's narrow-N config at 8 warps instead of 4
#   gemv-tile  GEMV tiles of 4096 instead of 8192 16-bit elements per program
#   masked-k:T:G  T% (matmul_tiled) and G% (gemv) extra K iterations, fully masked: the same
#              result for more work (a masked GEMV iteration moves no data, so it costs less)
#
# The plants target the NVIDIA tables: on another device the edited line is not the one used,
# which makes a CPU dry run (DEVICE=cpu) test the plumbing only.
PLANT_NAMES="group spill stages warps8 gemv-tile masked-k:T:G"

_plant_sed() {  # _plant_sed FILE EXPR: apply EXPR, fail unless it marked one more `# plant` line
  local before
  before=$(grep -c "# plant" "$1")
  sed -i -e "$2" "$1"
  if (( $(grep -c "# plant" "$1") <= before )); then
    echo "plant: the edit matched nothing in $1 (the table changed?)" >&2
    return 2
  fi
}

plant() {
  local c=kernels/_configs.py
  case $1 in
    group)
      _plant_sed $c 's/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3)),/(_BIG, KernelConfig(128, 256, 64, GROUP_M=1, num_warps=8, num_stages=3)),  # plant/' ;;
    spill)
      _plant_sed $c 's/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3)),/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=4, num_stages=3)),  # plant/' ;;
    stages)
      _plant_sed $c 's/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=4)),/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=6)),  # plant/' ;;
    warps8)
      _plant_sed $c 's/return KernelConfig(BLOCK_M=16, BLOCK_N=64, BLOCK_K=block_k, num_warps=4, num_stages=4)$/return KernelConfig(BLOCK_M=16, BLOCK_N=64, BLOCK_K=block_k, num_warps=8, num_stages=4)  # plant/' ;;
    gemv-tile)
      _plant_sed $c 's/elems = 4096 if dtype_key == "fp32" else 8192$/elems = 4096  # plant/' ;;
    masked-k:*:*)
      local spec=${1#masked-k:} loop='for k in range(0, tl.cdiv(K, BLOCK_K)):'
      local tiled=${spec%%:*} gemv=${spec#*:}
      _plant_sed kernels/matmul_tiled.py \
        "s|$loop|for k in range(0, tl.cdiv(K, BLOCK_K) + (tl.cdiv(K, BLOCK_K) * $tiled + 50) // 100):  # plant|" &&
      _plant_sed kernels/gemv.py \
        "s|$loop|for k in range(0, tl.cdiv(K, BLOCK_K) + (tl.cdiv(K, BLOCK_K) * $gemv + 50) // 100):  # plant|" ;;
    *)
      echo "plant: unknown plant '$1' (one of: $PLANT_NAMES)" >&2
      return 2 ;;
  esac
}
