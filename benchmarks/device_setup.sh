# Sourced at the start of every command on the lent H200: the image has torch,
# triton, pandas, scipy, rich, filelock, psutil and nvidia-ml-py, but not
# gitpython; its wheels travel in .whl/ (ignored by git, carried by the call).
set -o pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
# perfci bisect needs a git binary; where the image has none, unpack the Debian
# git (and its one library the image may lack) carried in .whl/ as .deb files.
if ! command -v git >/dev/null 2>&1 && [[ -f .whl/git.deb ]]; then
  for deb in .whl/*.deb; do dpkg -x "$deb" /tmp/gitroot; done
  export PATH=/tmp/gitroot/usr/bin:$PATH GIT_EXEC_PATH=/tmp/gitroot/usr/lib/git-core \
         GIT_TEMPLATE_DIR=/tmp/gitroot/usr/share/git-core/templates \
         LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/tmp/gitroot/usr/lib/x86_64-linux-gnu
fi
git --version || echo "device_setup: no git here" >&2
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
