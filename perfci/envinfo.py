"""Where a run happens: device, driver, runtime, versions, git SHA, host, time.

Everything that needs torch, pynvml, amdsmi or gitpython imports it inside the
function, so ``import perfci.envinfo`` stays cheap and works on a machine with no
GPU and none of the optional packages. The pure helpers (arch strings, visible
devices, lock names, cache sizes, version-text parsers) take plain values and
are what the CPU-only tests exercise.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import shutil
import socket
import subprocess
from typing import Any, Mapping

from perfci.model import Environment

MiB = 1024 * 1024

# MI300X / MI300A / MI325X (gfx942) and MI350X / MI355X (gfx950) put a 256 MB
# MALL ("Infinity Cache") behind the per-XCD L2. torch (hipDeviceProp) reports
# only the 4 MB L2 of one XCD, so a flush sized from it evicts nothing that
# matters (pytorch/pytorch#192159: a 1.64x spread between kernels collapsed to
# 2.6%). On these chips the MALL is the last level to flush.
MALL_BYTES_BY_ARCH = {"gfx942": 256 * MiB, "gfx950": 256 * MiB}

# Triton's do_bench flushes 256 MiB on every backend; we never flush less.
FLUSH_FLOOR_BYTES = 256 * MiB

SUBPROCESS_TIMEOUT_S = 10.0


# --------------------------------------------------------------------------- arch strings
def normalize_gcn_arch(gcn_arch_name: str) -> str:
    """``gfx942:sramecc+:xnack-`` -> ``gfx942`` (the feature flags are not the arch)."""
    return (gcn_arch_name or "").strip().split(":", 1)[0].lower()


def sm_arch(major: int, minor: int) -> str:
    """Compute capability (9, 0) -> ``sm_90``."""
    return f"sm_{int(major)}{int(minor)}"


def normalize_arch(value: str) -> str:
    """Any arch spelling we meet -> the canonical form used in results.

    ``gfx942:sramecc+:xnack-`` -> ``gfx942``, ``9.0`` -> ``sm_90``, ``SM_90`` -> ``sm_90``;
    anything else is returned lower-cased and stripped.
    """
    text = (value or "").strip()
    if text.lower().startswith("gfx"):
        return normalize_gcn_arch(text)
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if match:
        return sm_arch(int(match.group(1)), int(match.group(2)))
    return text.lower()


# --------------------------------------------------------------------------- visible devices
def _split_visible(value: str) -> list[str]:
    """Parse one ``*_VISIBLE_DEVICES`` value the way the runtimes do.

    Entries are comma separated; the runtime stops at the first invalid entry
    (``0,2,-1,1`` exposes only 0 and 2), so we do the same. UUID entries
    (``GPU-...``, ``MIG-...``) are kept as they are.
    """
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            break
        if entry.lstrip("-").isdigit():
            if int(entry) < 0:
                break
            entries.append(str(int(entry)))
        else:
            entries.append(entry)
    return entries


def visible_devices(env: Mapping[str, str], vendor: str | None = None) -> list[str]:
    """Physical device ids (indices or UUIDs) in visible order; ``[]`` when nothing restricts visibility.

    NVIDIA: ``CUDA_VISIBLE_DEVICES`` alone. AMD: ``ROCR_VISIBLE_DEVICES`` picks
    physical GPUs first, then ``HIP_VISIBLE_DEVICES`` (or, when that is unset,
    ``CUDA_VISIBLE_DEVICES``, which HIP honours too) indexes *into that list*.
    With ``vendor=None`` AMD rules apply when a HIP/ROCR variable is set.
    An empty result also covers ``CUDA_VISIBLE_DEVICES=""`` (no GPU at all):
    then nothing is benchmarked on a GPU and the mapping is never used.
    """
    if vendor is None:
        vendor = "amd" if ("HIP_VISIBLE_DEVICES" in env or "ROCR_VISIBLE_DEVICES" in env) else "nvidia"
    if vendor != "amd":
        return _split_visible(env.get("CUDA_VISIBLE_DEVICES", "")) if "CUDA_VISIBLE_DEVICES" in env else []

    rocr = _split_visible(env["ROCR_VISIBLE_DEVICES"]) if "ROCR_VISIBLE_DEVICES" in env else None
    hip_var = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES"
    hip = _split_visible(env[hip_var]) if hip_var in env else None
    if hip is None:
        return rocr or []
    if rocr is None:
        return hip
    composed: list[str] = []
    for entry in hip:
        # HIP indices count the devices ROCR left visible, not physical GPUs.
        if entry.isdigit() and int(entry) < len(rocr):
            composed.append(rocr[int(entry)])
        else:
            break
    return composed


def physical_device(visible_index: int, env: Mapping[str, str], vendor: str | None = None) -> str:
    """The physical id (index or UUID, as a string) of torch's device ``visible_index``."""
    devices = visible_devices(env, vendor)
    if 0 <= visible_index < len(devices):
        return devices[visible_index]
    return str(visible_index)


def gpu_lock_name(env: Mapping[str, str]) -> str:
    """A stable, filename-safe name for the physical GPU this process would use.

    The first visible device after composing ROCR/HIP/CUDA visibility (not just
    the first entry of one variable): with ``ROCR_VISIBLE_DEVICES=2`` and no HIP
    variable the process runs on physical GPU 2, and its lock must collide with
    a process started with ``HIP_VISIBLE_DEVICES=2``. Default ``"0"``.
    """
    devices = visible_devices(env)
    name = devices[0] if devices else "0"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# --------------------------------------------------------------------------- cache sizes
def device_cache_bytes(props: Any, arch: str) -> int:
    """Bytes of last-level cache a cold-cache flush must evict (0 when unknown).

    ``props`` is ``torch.cuda.get_device_properties(i)`` (or anything with an
    ``L2_cache_size`` attribute, or None on CPU).
    """
    mall = MALL_BYTES_BY_ARCH.get(normalize_arch(arch))
    if mall is not None:
        return mall
    try:
        return max(0, int(getattr(props, "L2_cache_size", 0) or 0))
    except (TypeError, ValueError):
        return 0


def flush_bytes(llc_bytes: int) -> int:
    """Size of the buffer written between timed iterations to empty the caches.

    2x the last-level cache, per the methodology (CUTLASS: footprint >= 2x L2,
    so replacement policy and set conflicts cannot leave operands resident). The
    256 MiB floor keeps the flush kernel long enough that the host-side launch
    overhead of the next (timed) kernel is hidden behind it instead of landing
    inside the event window; it is also what triton.testing.do_bench uses.
    """
    return max(2 * max(0, int(llc_bytes)), FLUSH_FLOOR_BYTES)


# --------------------------------------------------------------------------- version text parsers
def parse_nvidia_smi_version(text: str) -> dict[str, str]:
    """``nvidia-smi --version`` -> {"driver": "580.159.04", "cuda": "13.0", "nvml": ...}; {} on junk."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key.startswith("driver"):
            out["driver"] = value
        elif key.startswith("cuda"):
            out["cuda"] = value
        elif key.startswith("nvml"):
            out["nvml"] = value
    return out


def parse_rocm_smi_driver(obj: Any) -> str:
    """``rocm-smi --json`` (parsed) -> the ``system`` section's driver version, or ""."""
    try:
        return str(obj["system"]["Driver version"])
    except (KeyError, TypeError):
        return ""


# --------------------------------------------------------------------------- collection
def _run(cmd: list[str]) -> str:
    """stdout of a command, or "" when it is missing, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return ""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def _nvidia_driver_version() -> str:
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # missing package or no driver: fall through to the CLI
        pass
    return parse_nvidia_smi_version(_run(["nvidia-smi", "--version"])).get("driver", "")


def _amd_driver_version(physical: str) -> str:
    try:
        import amdsmi  # type: ignore[import-not-found]

        amdsmi.amdsmi_init()
        try:
            handles = amdsmi.amdsmi_get_processor_handles()
            index = int(physical) if physical.isdigit() and int(physical) < len(handles) else 0
            info = amdsmi.amdsmi_get_gpu_driver_info(handles[index])
        finally:
            amdsmi.amdsmi_shut_down()
        version = str(info.get("driver_version", "")) if isinstance(info, dict) else ""
        if version:
            return version
    except Exception:  # missing module or library: fall through to the CLIs
        pass
    from perfci.telemetry import parse_amdsmi_static_asic

    gpu_arg = physical if physical.isdigit() else "0"
    infos = parse_amdsmi_static_asic(_run(["amd-smi", "static", "--asic", "--driver", "-g", gpu_arg]))
    for info in infos:
        if info.driver_version:
            return info.driver_version
    text = _run(["rocm-smi", "--showdriverversion", "--json"])
    if text:
        import json

        try:
            return parse_rocm_smi_driver(json.loads(text))
        except ValueError:
            return ""
    return ""


def _triton_version() -> str:
    from importlib import metadata

    # ROCm builds of torch ship Triton as pytorch-triton-rocm; the module is still `triton`.
    for dist in ("triton", "pytorch-triton-rocm", "pytorch-triton", "triton-rocm"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return ""


def git_sha(path: str | None = None) -> str:
    """SHA of the checkout containing ``path`` (default cwd), ``-dirty`` if tracked files changed.

    Untracked files do not count: perfci writes result files into the checkout
    and they must not mark every run dirty. "" when not a repository or when
    gitpython is missing; never raises.
    """
    try:
        import git  # type: ignore[import-not-found]

        repo = git.Repo(path or os.getcwd(), search_parent_directories=True)
        sha = repo.head.commit.hexsha
        return sha + "-dirty" if repo.is_dirty(untracked_files=False) else sha
    except Exception:
        return ""


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def utc_timestamp() -> str:
    """Now, ISO 8601 UTC to the second, e.g. ``2026-11-29T11:51:40+00:00``.

    ``+00:00`` rather than ``Z``: Python 3.10's ``datetime.fromisoformat`` reads only the former.
    """
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def collect_environment(device: str) -> Environment:
    """Describe the current process's device (``"cuda"`` covers ROCm too, or ``"cpu"``)."""
    import perfci

    common = dict(
        perfci=perfci.__version__,
        git_sha=git_sha(),
        host=socket.gethostname(),
        timestamp=utc_timestamp(),
        triton=_triton_version(),
    )
    import torch

    common["torch"] = str(torch.__version__)
    if device == "cpu":
        return Environment(device_name=_cpu_name(), arch="cpu", vendor="cpu", **common)
    if device != "cuda":
        raise ValueError(f"collect_environment: device must be 'cuda' or 'cpu', got {device!r}")

    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        vendor = "amd"
        arch = normalize_gcn_arch(getattr(props, "gcnArchName", ""))
        runtime = f"hip {torch.version.hip}"
        driver = _amd_driver_version(physical_device(index, os.environ, "amd"))
    else:
        vendor = "nvidia"
        arch = sm_arch(props.major, props.minor)
        runtime = f"cuda {torch.version.cuda}" if torch.version.cuda else ""
        driver = _nvidia_driver_version()
    return Environment(
        device_name=str(props.name), arch=arch, vendor=vendor, driver=driver, runtime=runtime, **common
    )
