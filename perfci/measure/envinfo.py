"""Where a run happens: device, driver, runtime, versions, git SHA, host, time.

Everything that needs torch, pynvml, amdsmi or gitpython imports it inside the
function, so ``import perfci.measure.envinfo`` stays cheap and works on a machine with no
GPU and none of the optional packages. The version-text parsers are pure and
are what the CPU-only tests exercise; arch strings and visible devices live in
:mod:`perfci.measure.devices`.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import socket
import subprocess
from importlib import metadata
from typing import Any

from perfci import __version__
from perfci.git import checkout_sha
from perfci.measure.devices import normalize_gcn_arch, physical_device, sm_arch
from perfci.measure.telemetry.amd_parsers import parse_amdsmi_static_asic
from perfci.model import Environment

SUBPROCESS_TIMEOUT_S = 10.0


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
    gpu_arg = physical if physical.isdigit() else "0"
    infos = parse_amdsmi_static_asic(_run(["amd-smi", "static", "--asic", "--driver", "-g", gpu_arg]))
    for info in infos:
        if info.driver_version:
            return info.driver_version
    text = _run(["rocm-smi", "--showdriverversion", "--json"])
    if text:
        try:
            return parse_rocm_smi_driver(json.loads(text))
        except ValueError:
            return ""
    return ""


def _triton_version() -> str:
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
    and they must not mark every run dirty. A tree copied without its ``.git``
    (a container build, a copy to a test machine) has no SHA to read: then
    ``$PERFCI_GIT_SHA``, when the caller sets it, says which commit it was.
    "" otherwise, or when gitpython is missing; never raises.
    """
    given = os.environ.get("PERFCI_GIT_SHA", "").strip()
    try:
        # A worker runs in a folder of its own; the runner names the checkout it measures.
        where = path or os.environ.get("PERFCI_PROJECT_ROOT") or os.getcwd()
    except OSError:  # the current directory was deleted
        return given
    return checkout_sha(where) or given


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def utc_timestamp() -> str:
    """Now, ISO 8601 UTC to the second, e.g. ``2026-11-29T11:51:40+00:00``.

    ``+00:00`` rather than ``Z``: Python 3.10's ``datetime.fromisoformat`` reads only the former.
    """
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def collect_environment(device: str) -> Environment:
    """Describe the current process's device (``"cuda"`` covers ROCm too, or ``"cpu"``)."""
    common = dict(
        perfci=__version__,
        git_sha=git_sha(),
        host=socket.gethostname(),
        timestamp=utc_timestamp(),
        triton=_triton_version(),
    )
    import torch  # lazy: torch

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
