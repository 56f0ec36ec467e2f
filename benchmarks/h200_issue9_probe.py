#!/usr/bin/env python3
"""perfci issue 9 probe: device clocks, a device gate, queue depth, stall detection.

Self-contained. Run on the GPU machine:   python gpu_probe.py   (OUT=/dir to also write $OUT/probe.json)
Every experiment runs in its own try/except and records {"ok": bool, ...}; the whole
probe is budgeted to stay well under 90 s. Prints one JSON document on stdout.

The Triton kernels here are the same ones that xcompile.py cross-compiles for
sm_90 / gfx942 / gfx950 on a CPU-only machine, so what is run is what was inspected.
AMD=True selects the AMD asm (s_memrealtime / s_memtime); it is a constexpr, so the
other vendor's asm is never emitted.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import triton
import triton.language as tl

# ----------------------------------------------------------------------------------
# Device-side primitives (Triton)
# ----------------------------------------------------------------------------------
# One asm block reads both counters, so nothing can be scheduled between the two
# reads at the LLVM level; is_pure=False makes it `asm sideeffect` (never CSE'd,
# hoisted out of a loop, or dropped). On AMD both are SMEM ops: they bump lgkmcnt,
# so the block waits on lgkmcnt(0) before the SGPRs are read.
NV_CLOCKS = tl.constexpr("mov.u64 $0, %globaltimer;\n\tmov.u64 $1, %clock64;")
AMD_CLOCKS = tl.constexpr("s_memrealtime $0\n\ts_memtime $1\n\ts_waitcnt lgkmcnt(0)")
NV_SMID = tl.constexpr("mov.u32 $0, %smid;")
# gfx9: HW_REG_HW_ID (wave/simd/cu/sh/se ids); CU_ID|SH_ID|SE_ID are bits [15:8]
AMD_SMID = tl.constexpr("s_getreg_b32 $0, hwreg(HW_REG_HW_ID, 8, 8)")
# gfx940+: HW_REG_XCC_ID, bits [3:0] = XCC (die) id
AMD_XCC = tl.constexpr("s_getreg_b32 $0, hwreg(HW_REG_XCC_ID, 0, 4)")
NV_PAUSE = tl.constexpr("nanosleep.u32 256;\n\tmov.u32 $0, 0;")
AMD_PAUSE = tl.constexpr("s_sleep 2\n\ts_mov_b32 $0, 0")


@triton.jit
def _clocks(AMD: tl.constexpr):
    """(timer, cycles): NVIDIA (%globaltimer ns, %clock64); AMD (s_memrealtime ticks, s_memtime)."""
    if AMD:
        t, c = tl.inline_asm_elementwise(AMD_CLOCKS, "=s,=s", [], dtype=(tl.int64, tl.int64),
                                         is_pure=False, pack=1)
    else:
        t, c = tl.inline_asm_elementwise(NV_CLOCKS, "=l,=l", [], dtype=(tl.int64, tl.int64),
                                         is_pure=False, pack=1)
    return t, c


@triton.jit
def _unit_id(AMD: tl.constexpr):
    """The SM (NVIDIA) or XCC<<8|SE/SH/CU (AMD) the program runs on."""
    if AMD:
        cu = tl.inline_asm_elementwise(AMD_SMID, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
        xcc = tl.inline_asm_elementwise(AMD_XCC, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
        u = (xcc << 8) | cu
    else:
        u = tl.inline_asm_elementwise(NV_SMID, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return u


@triton.jit
def _pause(AMD: tl.constexpr):
    """Back off between polls (nanosleep on sm_70+, s_sleep on AMD); returns a dummy 0."""
    if AMD:
        z = tl.inline_asm_elementwise(AMD_PAUSE, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
    else:
        z = tl.inline_asm_elementwise(NV_PAUSE, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return z


@triton.jit
def _poll(ptr, AMD: tl.constexpr):
    """A load that is re-issued every call and bypasses the caches.

    NVIDIA: volatile -> ld.volatile.global (SASS LDG.E.STRONG.SYS). Adding .cv breaks
    ptxas under Triton 3.9 ("'.volatile' cannot be combined with '.cv'").
    AMD: volatile alone is NOT enough on Triton 3.6 (the LLVM load is not volatile and
    can be hoisted / turned into a cached s_load); cache_modifier=".cv" gives
    global_load_dword ... sc0 sc1 on gfx942/gfx950 under both Triton 3.6 and 3.9."""
    if AMD:
        v = tl.load(ptr, volatile=True, cache_modifier=".cv")
    else:
        v = tl.load(ptr, volatile=True)
    return v


@triton.jit
def stamp_kernel(out_ptr, AMD: tl.constexpr):
    """Each program writes (timer, cycles, unit id) to out[pid*4 : pid*4+3].

    grid=(1,): the plain 'stamp'. grid=(k*num_units,): one stamp per SM/CU (almost surely),
    so a pair of wide stamps gives per-unit (d_cycles, d_time) without assuming the
    units' cycle counters are synchronised."""
    pid = tl.program_id(0)
    t, c = _clocks(AMD)
    u = _unit_id(AMD)
    tl.store(out_ptr + pid * 4 + 0, t)
    tl.store(out_ptr + pid * 4 + 1, c)
    tl.store(out_ptr + pid * 4 + 2, u.to(tl.int64))


@triton.jit(do_not_specialize=["window_ticks", "max_iters"])
def clock_probe_kernel(out_ptr, window_ticks, max_iters, AMD: tl.constexpr):
    """Mean core clock over a fixed timer window, all on one unit (one SM's counter).

    Both ends are taken at the first read after a timer tick edge, so the timer's
    granularity does not bias the window. out = [t0, c0, t1, c1, iters, unit, 0, 0].
    clock_hz = (c1 - c0) / (t1 - t0) * timer_hz."""
    tp, cp = _clocks(AMD)
    t0, c0 = _clocks(AMD)
    i = 0
    while (t0 == tp) & (i < max_iters):          # align to a tick edge
        t0, c0 = _clocks(AMD)
        i += 1
    t1, c1 = _clocks(AMD)
    while ((t1 - t0) < window_ticks) & (i < max_iters):
        t1, c1 = _clocks(AMD)
        i += 1
    u = _unit_id(AMD)
    tl.store(out_ptr + 0, t0)
    tl.store(out_ptr + 1, c0)
    tl.store(out_ptr + 2, t1)
    tl.store(out_ptr + 3, c1)
    tl.store(out_ptr + 4, i.to(tl.int64))
    tl.store(out_ptr + 5, u.to(tl.int64))


@triton.jit(do_not_specialize=["n"])
def timer_trace_kernel(out_ptr, n, AMD: tl.constexpr):
    """n back-to-back (timer, cycles) reads: the timer's tick size and the cost of a read."""
    for i in range(n):
        t, c = _clocks(AMD)
        tl.store(out_ptr + 2 * i, t)
        tl.store(out_ptr + 2 * i + 1, c)


@triton.jit(do_not_specialize=["slot", "token", "timeout_ticks", "max_iters"])
def gate_kernel(flag_ptr, out_ptr, slot, token, timeout_ticks, max_iters, AMD: tl.constexpr):
    """Hold the queue until flag[slot] >= token (the host writes token after enqueuing).

    flag_ptr: int32 in host-mapped pinned memory. The spin is bounded twice: by a
    device-timer timeout and by an iteration cap, so a bug cannot hang the GPU.
    out[slot*8 : slot*8+8] = [first_seen, last_seen, iters, timed_out, t_start, t_end, c_start, c_end].
    first_seen >= token: the host had released before the device got here (no wait)."""
    t0, c0 = _clocks(AMD)
    f = _poll(flag_ptr + slot, AMD)
    first = f
    t1 = t0
    c1 = c0
    i = 0
    while (f < token) & ((t1 - t0) < timeout_ticks) & (i < max_iters):
        z = _pause(AMD)
        f = _poll(flag_ptr + slot, AMD) + z
        t1, c1 = _clocks(AMD)
        i += 1
    base = out_ptr + slot * 8
    tl.store(base + 0, first.to(tl.int64))
    tl.store(base + 1, f.to(tl.int64))
    tl.store(base + 2, i.to(tl.int64))
    tl.store(base + 3, (f < token).to(tl.int64))
    tl.store(base + 4, t0)
    tl.store(base + 5, t1)
    tl.store(base + 6, c0)
    tl.store(base + 7, c1)


@triton.jit(do_not_specialize=["duration_ticks", "max_iters"])
def timer_sleep_kernel(out_ptr, duration_ticks, max_iters, AMD: tl.constexpr):
    """The 'sleep gate': busy-wait a fixed device-timer interval (not cycles, so it
    does not depend on the clock). out = [t0, t1, c0, c1]."""
    t0, c0 = _clocks(AMD)
    t1 = t0
    c1 = c0
    i = 0
    while ((t1 - t0) < duration_ticks) & (i < max_iters):
        z = _pause(AMD)
        t1, c1 = _clocks(AMD)
        t1 = t1 + z
        i += 1
    tl.store(out_ptr + 0, t0)
    tl.store(out_ptr + 1, t1)
    tl.store(out_ptr + 2, c0)
    tl.store(out_ptr + 3, c1)


@triton.jit
def noop_kernel(ptr):
    """A launch that does (almost) nothing: for queue-depth probing."""
    tl.store(ptr + tl.program_id(0), 1)


# Signatures used by xcompile.py (name -> Triton type); constexprs passed separately.
SIGNATURES = {
    "stamp_kernel": {"out_ptr": "*i64", "AMD": "constexpr"},
    "clock_probe_kernel": {"out_ptr": "*i64", "window_ticks": "i64", "max_iters": "i32", "AMD": "constexpr"},
    "timer_trace_kernel": {"out_ptr": "*i64", "n": "i32", "AMD": "constexpr"},
    "gate_kernel": {"flag_ptr": "*i32", "out_ptr": "*i64", "slot": "i32", "token": "i32",
                    "timeout_ticks": "i64", "max_iters": "i32", "AMD": "constexpr"},
    "timer_sleep_kernel": {"out_ptr": "*i64", "duration_ticks": "i64", "max_iters": "i32", "AMD": "constexpr"},
}
KERNELS = {"stamp_kernel": stamp_kernel, "clock_probe_kernel": clock_probe_kernel,
           "timer_trace_kernel": timer_trace_kernel, "gate_kernel": gate_kernel,
           "timer_sleep_kernel": timer_sleep_kernel}

# ----------------------------------------------------------------------------------
# Host side
# ----------------------------------------------------------------------------------
T_START = time.perf_counter()
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "80"))
RESULTS: dict = {"probe": "perfci-issue9", "version": 1, "experiments": {}}


def elapsed() -> float:
    return time.perf_counter() - T_START


def dump() -> None:
    out = os.environ.get("OUT")
    if out:
        try:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "probe.json"), "w") as f:
                json.dump(RESULTS, f, indent=1, default=str)
        except Exception:  # noqa: BLE001
            pass


def experiment(name: str, min_left_s: float = 5.0):
    """Decorator: run fn() in try/except, record {'ok', 'secs', ...}; skip when over budget."""
    def wrap(fn):
        def run():
            if elapsed() > BUDGET_S - min_left_s:
                RESULTS["experiments"][name] = {"ok": False, "skipped": f"budget ({elapsed():.1f}s used)"}
                return None
            t0 = time.perf_counter()
            try:
                res = fn() or {}
                res = {"ok": True, **res}
            except Exception as exc:  # noqa: BLE001
                res = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-2500:]}
            res["secs"] = round(time.perf_counter() - t0, 3)
            RESULTS["experiments"][name] = res
            dump()
            print(f"[probe] {name}: ok={res['ok']} {res['secs']}s", file=sys.stderr, flush=True)
            return res
        run.__name__ = fn.__name__
        return run
    return wrap


def spin_us(us: float) -> None:
    """Deterministic host 'load': busy-wait (time.sleep overshoots by tens of us)."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def q(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = min(len(xs) - 1, max(0, int(round(p * (len(xs) - 1)))))
    return xs[k]


class RawPtr:
    """A pointer Triton's launcher accepts: an object with data_ptr() and dtype."""

    def __init__(self, addr: int, dtype):
        self.addr, self.dtype = int(addr), dtype

    def data_ptr(self) -> int:
        return self.addr


def main() -> int:  # noqa: C901 - a probe is a list of experiments
    import torch

    ctx: dict = {}
    RESULTS["env"] = env = {}
    env["python"] = sys.version.split()[0]
    env["torch"] = torch.__version__
    env["triton"] = triton.__version__
    env["cuda_available"] = torch.cuda.is_available()
    if not torch.cuda.is_available():
        RESULTS["fatal"] = "no GPU visible to torch"
        print(json.dumps(RESULTS, indent=1, default=str))
        dump()
        return 1
    AMD = torch.version.hip is not None
    ctx["AMD"] = AMD
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    env.update({
        "vendor": "amd" if AMD else "nvidia", "hip": torch.version.hip, "cuda": torch.version.cuda,
        "name": props.name, "sms": props.multi_processor_count,
        "cc": f"{props.major}.{props.minor}", "gcn_arch": getattr(props, "gcnArchName", None),
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "has_torch_cuda__sleep": hasattr(torch.cuda, "_sleep"),
        "has_event_query": hasattr(torch.cuda.Event, "query"),
    })
    try:
        torch.cuda.Event(enable_timing=True, external=True)
        env["event_external_kw"] = True
    except Exception as exc:  # noqa: BLE001
        env["event_external_kw"] = f"{type(exc).__name__}: {exc}"
    try:
        env["nvml_clock_rate_mhz"] = torch.cuda.clock_rate()
    except Exception as exc:  # noqa: BLE001
        env["nvml_clock_rate_mhz"] = f"unavailable: {type(exc).__name__}"
    nvml = None
    if not AMD:
        try:
            import pynvml
            pynvml.nvmlInit()
            nvml = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
            env["nvml"] = True
        except Exception as exc:  # noqa: BLE001
            env["nvml"] = f"unavailable: {type(exc).__name__}: {exc}"

    def nvml_sm_mhz():
        if nvml is None:
            return None
        try:
            import pynvml
            return pynvml.nvmlDeviceGetClockInfo(nvml, pynvml.NVML_CLOCK_SM)
        except Exception:  # noqa: BLE001
            return None

    i64 = lambda n: torch.zeros(n, dtype=torch.int64, device=dev)  # noqa: E731
    SMS = props.multi_processor_count

    # ---------------------------------------------------------------- E1: JIT-compile, inspect asm
    @experiment("E1_compile_and_asm")
    def e1():
        out = {}
        buf = i64(4 * 4 * SMS)
        k = stamp_kernel[(1,)](buf, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        asm = getattr(k, "asm", {}) or {}
        text = asm.get("amdgcn" if AMD else "ptx", "")
        pats = (["s_memrealtime", "s_memtime", "lgkmcnt(0)", "HW_REG_XCC_ID"] if AMD
                else ["%globaltimer", "%clock64", "%smid"])
        out["stamp_asm_has"] = {p: (p in text) for p in pats}
        sass = None
        if not AMD:
            try:
                sass = asm["sass"]          # AsmDict computes it from the cubin on first access
            except Exception:  # noqa: BLE001
                sass = None
        if sass:
            out["stamp_sass_has"] = {p: (p in sass) for p in ["SR_GLOBALTIMERLO", "SR_CLOCKLO", "SMID"]}
        row = buf[:4].tolist()
        out["first_stamp"] = row
        flag = torch.zeros(8, dtype=torch.int32, device=dev)
        k = gate_kernel[(1,)](flag, buf, 0, 0, 1000, 10, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        text = (getattr(k, "asm", {}) or {}).get("amdgcn" if AMD else "ptx", "")
        out["gate_volatile_load"] = (("sc0 sc1" in text) if AMD else ("ld.volatile.global" in text))
        sass = None
        if not AMD:
            try:
                sass = k.asm["sass"]
            except Exception:  # noqa: BLE001
                sass = None
        if sass:
            out["gate_sass_ldg_strong_sys"] = "LDG.E.STRONG.SYS" in sass
        for kern, args in [(clock_probe_kernel, (buf, 1000, 1000)), (timer_trace_kernel, (buf, 4)),
                           (timer_sleep_kernel, (buf, 1000, 1000))]:
            kern[(1,)](*args, AMD=AMD, num_warps=1)
        noop_kernel[(1,)](buf)
        torch.cuda.synchronize()
        return out

    # ---------------------------------------------------------------- E2: timer tick, read cost, timer rate
    @experiment("E2_timer")
    def e2():
        n = 512
        buf = i64(2 * n)
        timer_trace_kernel[(1,)](buf, n, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        v = buf.tolist()
        ts, cs = v[0::2], v[1::2]
        dts = [b - a for a, b in zip(ts, ts[1:])]
        dcs = [b - a for a, b in zip(cs, cs[1:])]
        nz = [d for d in dts if d > 0]
        jumps = sorted(set(nz))
        out = {"timer_monotonic": all(d >= 0 for d in dts), "timer_changes": len(nz),
               "tick_min": min(nz) if nz else None, "tick_median": q(nz, 0.5),
               "distinct_jumps": jumps[:20], "cycles_per_read_median": q(dcs, 0.5),
               "span_ticks": ts[-1] - ts[0], "span_cycles": cs[-1] - cs[0]}
        # timer rate vs the host clock: two stamps ~300 ms apart
        b = i64(4)
        stamp_kernel[(1,)](b, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        h0 = time.perf_counter_ns()
        t0 = b[0].item()
        time.sleep(0.3)
        stamp_kernel[(1,)](b, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        h1 = time.perf_counter_ns()
        t1 = b[0].item()
        hz = (t1 - t0) / ((h1 - h0) / 1e9)
        out["timer_hz_vs_host"] = hz
        # the host stamps straddle the device ones by a launch+sync (~tens of us): +-1e-3 of 300 ms
        nominal = 1e9 if not AMD else min((25e6, 27e6, 100e6), key=lambda f: abs(f - hz))
        out["timer_hz_nominal_guess"] = nominal
        ctx["timer_hz"] = nominal if abs(hz / nominal - 1) < 0.01 else hz
        out["timer_hz_used"] = ctx["timer_hz"]
        return out

    def ticks(ns: float) -> int:
        return int(ns * ctx.get("timer_hz", 1e9) / 1e9)

    # ---------------------------------------------------------------- E3: in-kernel clock probe (one SM)
    @experiment("E3_clock_probe")
    def e3():
        hz = ctx.get("timer_hz", 1e9)
        a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        for _ in range(30):              # warm the clocks up (~30 x 0.1 ms..1 ms)
            a @ a
        torch.cuda.synchronize()
        out = {"nvml_sm_mhz_before": nvml_sm_mhz(), "windows": {}}
        buf = i64(8)
        for w_us in (10, 50, 200):
            mhz = []
            for _ in range(3):
                clock_probe_kernel[(1,)](buf, ticks(w_us * 1000), 50_000_000, AMD=AMD, num_warps=1)
                torch.cuda.synchronize()
                t0, c0, t1, c1, it, unit = buf[:6].tolist()
                mhz.append(round((c1 - c0) / (t1 - t0) * hz / 1e6, 2) if t1 > t0 else None)
            out["windows"][f"{w_us}us"] = {"mhz": mhz, "iters_last": it, "unit_last": unit}
        out["nvml_sm_mhz_after"] = nvml_sm_mhz()
        # under load: probe right after a matmul burst, in the same stream
        mhz = []
        for _ in range(3):
            for _ in range(5):
                a @ a
            clock_probe_kernel[(1,)](buf, ticks(20_000), 50_000_000, AMD=AMD, num_warps=1)
            torch.cuda.synchronize()
            t0, c0, t1, c1 = buf[:4].tolist()
            mhz.append(round((c1 - c0) / (t1 - t0) * hz / 1e6, 2))
        out["after_matmul_20us_mhz"] = mhz
        ctx["probe_mhz"] = q([m for w in out["windows"].values() for m in w["mhz"] if m], 0.5)
        return out

    # ---------------------------------------------------------------- E4: are per-SM cycle counters in sync?
    @experiment("E4_cross_unit_counters")
    def e4():
        hz = ctx.get("timer_hz", 1e9)
        G = 4 * SMS
        s0, s1 = i64(4 * G), i64(4 * G)

        def rows(b):
            v = b.tolist()
            return [(v[4 * i], v[4 * i + 1], v[4 * i + 2]) for i in range(G)]
        stamp_kernel[(G,)](s0, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        r0 = rows(s0)
        units = sorted({u for _, _, u in r0})
        f = (ctx.get("probe_mhz") or 1000.0) * 1e6
        # offset of each unit's counter against the first row's, after removing the timer
        # difference (integer deltas first: the raw counters are too big for float precision)
        t_ref, c_ref, _ = r0[0]
        off = {}
        for t, c, u in r0:
            off.setdefault(u, []).append(((c - c_ref) - (t - t_ref) * f / hz) / f)
        offs = [q(v, 0.5) for v in off.values()]
        out = {"programs": G, "units_seen": len(units), "unit_min": units[0], "unit_max": units[-1],
               "counter_offset_spread_us": (max(offs) - min(offs)) * 1e6 if offs else None,
               "counter_offset_p10_p90_us": [(q(offs, 0.1) - q(offs, 0.5)) * 1e6,
                                              (q(offs, 0.9) - q(offs, 0.5)) * 1e6]}

        def paired(r_a, r_b):
            first, last = {}, {}
            for t, c, u in r_a:
                if u not in first or t < first[u][0]:
                    first[u] = (t, c)
            for t, c, u in r_b:
                if u not in last or t > last[u][0]:
                    last[u] = (t, c)
            rates = {u: (last[u][1] - first[u][1]) / (last[u][0] - first[u][0]) * hz / 1e6
                     for u in first.keys() & last.keys() if last[u][0] > first[u][0]}
            v = sorted(rates.values())
            return {"units": len(v), "mhz_min": round(v[0], 2), "mhz_median": round(q(v, 0.5), 2),
                    "mhz_max": round(v[-1], 2)} if v else {"units": 0}, rates
        # (a) busy: all SMs busy with matmuls between the stamps
        a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        stamp_kernel[(G,)](s0, AMD=AMD, num_warps=1)
        for _ in range(20):
            a @ a
        stamp_kernel[(G,)](s1, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        out["busy_pairs"], _ = paired(rows(s0), rows(s1))
        # (b) mostly idle: one SM spins ~5 ms, the others idle; do idle SMs' counters keep counting?
        sl = i64(4)
        stamp_kernel[(G,)](s0, AMD=AMD, num_warps=1)
        timer_sleep_kernel[(1,)](sl, ticks(5_000_000), 50_000_000, AMD=AMD, num_warps=1)
        stamp_kernel[(G,)](s1, AMD=AMD, num_warps=1)
        torch.cuda.synchronize()
        out["idle_pairs"], _ = paired(rows(s0), rows(s1))
        t0, t1, c0, c1 = sl.tolist()
        out["sleeper_mhz"] = round((c1 - c0) / (t1 - t0) * hz / 1e6, 2) if t1 > t0 else None
        # (c) cross-unit naive: single-program stamps (maybe on different SMs) around the same burst
        b0, b1 = i64(4), i64(4)
        nv = []
        for _ in range(5):
            stamp_kernel[(1,)](b0, AMD=AMD, num_warps=1)
            for _ in range(5):
                a @ a
            stamp_kernel[(1,)](b1, AMD=AMD, num_warps=1)
            torch.cuda.synchronize()
            x0, x1 = b0[:3].tolist(), b1[:3].tolist()
            nv.append({"same_unit": x0[2] == x1[2],
                       "mhz": round((x1[1] - x0[1]) / (x1[0] - x0[0]) * hz / 1e6, 2)})
        out["naive_single_stamp_pairs"] = nv
        return out

    # ---------------------------------------------------------------- E5: a flag the device can see
    @experiment("E5_flag_pointer_and_gate")
    def e5():
        out = {}
        hz = ctx.get("timer_hz", 1e9)
        flag = torch.zeros(64, dtype=torch.int32, pin_memory=True)
        rec = i64(8 * 64)
        out["pinned"] = flag.is_pinned()
        # the device pointer of the pinned page, from the driver
        dptr = None
        try:
            import ctypes
            if AMD:
                lib = ctypes.CDLL("libamdhip64.so")
                p = ctypes.c_void_p()
                rc = lib.hipHostGetDevicePointer(ctypes.byref(p), ctypes.c_void_p(flag.data_ptr()), 0)
            else:
                lib = ctypes.CDLL("libcuda.so.1")
                p = ctypes.c_uint64()
                rc = lib.cuMemHostGetDevicePointer_v2(ctypes.byref(p), ctypes.c_void_p(flag.data_ptr()), 0)
            out["host_get_device_pointer_rc"] = rc
            if rc == 0:
                dptr = int(p.value)
                out["device_ptr_equals_host_ptr"] = dptr == flag.data_ptr()
        except Exception as exc:  # noqa: BLE001
            out["host_get_device_pointer"] = f"{type(exc).__name__}: {exc}"

        def gate_once(ptr, slot, token, release_after_ms, timeout_ms, pre_release=False):
            flag[slot] = 0
            if pre_release:
                flag[slot] = token
            gate_kernel[(1,)](ptr, rec, slot, token, ticks(timeout_ms * 1e6), 5_000_000, AMD=AMD, num_warps=1)
            ev = torch.cuda.Event()
            ev.record()
            t_enq = time.perf_counter()
            if release_after_ms is not None:
                time.sleep(release_after_ms / 1e3)
                done_before = ev.query()
                flag[slot] = token
            else:
                done_before = None
            torch.cuda.synchronize()
            r = rec[8 * slot: 8 * slot + 8].tolist()
            return {"first": r[0], "last": r[1], "iters": r[2], "timed_out": bool(r[3]),
                    "wait_us": round((r[5] - r[4]) / hz * 1e6, 1),
                    "post_gate_done_before_release": done_before,
                    "host_ms": round((time.perf_counter() - t_enq) * 1e3, 2)}
        variants = {"pinned_tensor": flag}
        if dptr is not None:
            variants["raw_device_ptr"] = RawPtr(dptr, torch.int32)
        for name, ptr in variants.items():
            v = {}
            try:
                v["release_after_3ms"] = gate_once(ptr, 1, 7, 3.0, 200)
                v["never_released_timeout_5ms"] = gate_once(ptr, 2, 7, None, 5)
                v["released_before_launch"] = gate_once(ptr, 3, 7, 0.0, 200, pre_release=True)
                v["works"] = (not v["release_after_3ms"]["timed_out"]
                              and v["release_after_3ms"]["wait_us"] > 2000
                              and v["never_released_timeout_5ms"]["timed_out"]
                              and v["released_before_launch"]["first"] >= 7)
            except Exception as exc:  # noqa: BLE001
                v["error"] = f"{type(exc).__name__}: {exc}"
                v["works"] = False
            out[name] = v
        ctx["flag"] = flag
        ctx["flag_ptr"] = next((variants[n] for n in variants if out[n].get("works")), None)
        # device-memory flag released from a side stream (no mapped memory needed)
        try:
            dflag = torch.zeros(64, dtype=torch.int32, device=dev)
            side = torch.cuda.Stream()
            gate_kernel[(1,)](dflag, rec, 4, 9, ticks(200e6), 5_000_000, AMD=AMD, num_warps=1)
            time.sleep(0.003)
            with torch.cuda.stream(side):
                dflag[4:5].fill_(9)
            torch.cuda.synchronize()
            r = rec[32:40].tolist()
            out["device_flag_side_stream"] = {"timed_out": bool(r[3]), "wait_us": round((r[5] - r[4]) / hz * 1e6, 1),
                                              "works": (not r[3]) and (r[5] - r[4]) / hz > 0.002}
        except Exception as exc:  # noqa: BLE001
            out["device_flag_side_stream"] = {"error": f"{type(exc).__name__}: {exc}", "works": False}
        return out

    # ---------------------------------------------------------------- E6: queue depth
    @experiment("E6_queue_depth", min_left_s=12)
    def e6():
        out = {}
        hold = i64(4)
        nb = i64(64)

        def probe(kind, n_max):
            timer_sleep_kernel[(1,)](hold, ticks(600e6), 200_000_000, AMD=AMD, num_warps=1)
            times = []
            blocked_at = None
            evs = []
            t_loop = time.perf_counter()
            for i in range(n_max):
                t = time.perf_counter()
                if kind == "triton_noop":
                    noop_kernel[(1,)](nb)
                elif kind == "event":
                    e = torch.cuda.Event(enable_timing=True)
                    e.record()
                    evs.append(e)
                elif kind == "iteration":          # flush + start + 2 kernels + end = 5 entries
                    nb.zero_()
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    noop_kernel[(1,)](nb)
                    noop_kernel[(1,)](nb)
                    e1.record()
                    evs += [e0, e1]
                dt = time.perf_counter() - t
                times.append(dt)
                if dt > 0.05:
                    blocked_at = i
                    break
            loop_ms = (time.perf_counter() - t_loop) * 1e3
            torch.cuda.synchronize()
            return {"blocked_at": blocked_at, "launched": len(times), "hold_ms": 600,
                    "loop_ms": round(loop_ms, 1),
                    "conclusive": blocked_at is not None or loop_ms < 500,
                    "blocked_call_ms":
                    round(times[-1] * 1e3, 1) if blocked_at is not None else None,
                    "call_us_median": round(q(times[:-1] or times, 0.5) * 1e6, 2),
                    "call_us_p99": round(q(times[:-1] or times, 0.99) * 1e6, 2)}
        for kind, n in (("triton_noop", 5000), ("event", 5000), ("iteration", 1200)):
            try:
                out[kind] = probe(kind, n)
            except Exception as exc:  # noqa: BLE001
                out[kind] = {"error": f"{type(exc).__name__}: {exc}"}
        b = out.get("triton_noop", {}).get("blocked_at")
        ctx["queue_depth"] = b
        return out

    # ---------------------------------------------------------------- E7: a gated repeat, four ways
    @experiment("E7_gated_repeat", min_left_s=10)
    def e7():
        hz = ctx.get("timer_hz", 1e9)
        l2 = props.L2_cache_size if getattr(props, "L2_cache_size", 0) else 64 << 20
        flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=dev)
        A = torch.randn(64, 8192, device=dev, dtype=torch.bfloat16)
        B = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
        part = torch.empty(4, 64, 4096, device=dev, dtype=torch.bfloat16)
        C = torch.empty(64, 4096, device=dev, dtype=torch.bfloat16)
        Ar = A.view(64, 4, 2048).transpose(0, 1)
        Br = B.view(4, 2048, 4096)

        def op():                            # split-K: partial (bmm) + reduce (sum): one span
            torch.bmm(Ar, Br, out=part)
            torch.sum(part, dim=0, out=C)
        G = 2 * SMS
        s0, s1 = i64(4 * G), i64(4 * G)
        gate_rec = i64(8 * 64)
        sleep_rec = i64(4)
        flag_ptr = ctx.get("flag_ptr")
        flag = ctx.get("flag")
        ITERS = 70
        token = [100]

        def repeat(mode, host_load_us, sleep_ms=20.0):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
            post = torch.cuda.Event()
            token[0] += 1
            tok, slot = token[0], token[0] % 64
            t_host0 = time.perf_counter()
            if mode == "spin":
                gate_kernel[(1,)](flag_ptr, gate_rec, slot, tok, ticks(500e6), 20_000_000, AMD=AMD, num_warps=1)
            elif mode == "sleep":
                timer_sleep_kernel[(1,)](sleep_rec, ticks(sleep_ms * 1e6), 100_000_000, AMD=AMD, num_warps=1)
            post.record()
            stamp_kernel[(G,)](s0, AMD=AMD, num_warps=1)
            for i in range(ITERS):
                flush.zero_()
                starts[i].record()
                if host_load_us:
                    spin_us(host_load_us)
                op()
                ends[i].record()
            stamp_kernel[(G,)](s1, AMD=AMD, num_warps=1)
            enq_ms = (time.perf_counter() - t_host0) * 1e3
            stalled = post.query()                       # the detector, before the release
            if mode == "spin":
                flag[slot] = tok
            torch.cuda.synchronize()
            ms = [a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends)]
            res = {"stalled": stalled, "enqueue_ms": round(enq_ms, 2),
                   "span_us_median": round(q(ms, 0.5), 2), "span_us_min": round(min(ms), 2),
                   "span_us_max": round(max(ms), 2)}
            # clock over the work (gate excluded), per-unit pairing
            v0, v1 = s0.tolist(), s1.tolist()
            first, last = {}, {}
            for i in range(G):
                t, c, u = v0[4 * i: 4 * i + 3]
                if u not in first or t < first[u][0]:
                    first[u] = (t, c)
                t, c, u = v1[4 * i: 4 * i + 3]
                if u not in last or t > last[u][0]:
                    last[u] = (t, c)
            rates = sorted((last[u][1] - first[u][1]) / (last[u][0] - first[u][0]) * hz / 1e6
                           for u in first.keys() & last.keys() if last[u][0] > first[u][0])
            if rates:
                res["clock_mhz_median"] = round(q(rates, 0.5), 1)
                res["clock_mhz_spread"] = round((rates[-1] - rates[0]) / q(rates, 0.5), 4)
                res["clock_units"] = len(rates)
            if mode == "spin":
                r = gate_rec[8 * slot: 8 * slot + 8].tolist()
                res["gate"] = {"first": r[0], "timed_out": bool(r[3]),
                               "wait_us": round((r[5] - r[4]) / hz * 1e6, 1),
                               "gate_exit_to_stamp_us": round((min(v0[0::4]) - r[5]) / hz * 1e6, 2)}
            return res
        out = {}
        repeat("none", 0)                               # warm-up (allocations, compiles)
        plan = [("none_idle_host", "none", 0), ("none_host_load", "none", 200),
                ("sleep_host_load", "sleep", 200), ("sleep_short_host_load", "sleep", 200)]
        if flag_ptr is not None:
            plan[2:2] = [("spin_idle_host", "spin", 0), ("spin_host_load", "spin", 200)]
        else:
            out["spin"] = "skipped: no working mapped flag from E5"
        for name, mode, load in plan:
            try:
                out[name] = repeat(mode, load, sleep_ms=2.0 if "short" in name else 40.0)
            except Exception as exc:  # noqa: BLE001
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        return out

    # ---------------------------------------------------------------- E8: graph of the whole repeat
    @experiment("E8_graph_repeat", min_left_s=8)
    def e8():
        A = torch.randn(64, 8192, device=dev, dtype=torch.bfloat16)
        B = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
        C = torch.empty(64, 4096, device=dev, dtype=torch.bfloat16)
        l2 = props.L2_cache_size if getattr(props, "L2_cache_size", 0) else 64 << 20
        flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=dev)
        ITERS = 70
        starts = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(ITERS)]
        ends = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(ITERS)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.mm(A, B, out=C)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(ITERS):
                flush.zero_()
                starts[i].record()
                torch.mm(A, B, out=C)
                ends[i].record()
        out = {}
        for rep in range(2):
            t = time.perf_counter()
            g.replay()
            launch_us = (time.perf_counter() - t) * 1e6
            torch.cuda.synchronize()
            ms = [a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends)]
            out[f"replay{rep}"] = {"launch_us": round(launch_us, 1), "span_us_median": round(q(ms, 0.5), 2),
                                   "span_us_max": round(max(ms), 2)}
        # the same ops eagerly, for comparison
        st = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
        en = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS)]
        for i in range(ITERS):
            flush.zero_()
            st[i].record()
            torch.mm(A, B, out=C)
            en[i].record()
        torch.cuda.synchronize()
        ms = [a.elapsed_time(b) * 1e3 for a, b in zip(st, en)]
        out["eager"] = {"span_us_median": round(q(ms, 0.5), 2), "span_us_max": round(max(ms), 2)}
        return out

    for fn in (e1, e2, e3, e4, e5, e6, e7, e8):
        fn()
    RESULTS["total_secs"] = round(elapsed(), 2)
    dump()
    print(json.dumps(RESULTS, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
