# Sourced at the start of every command on the lent H200: the image has torch,
# triton, pandas, scipy, rich, filelock, psutil and nvidia-ml-py, but not
# gitpython; its wheels travel in .whl/ (ignored by git, carried by the call).
set -o pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
