"""The device gate on the H200 (2026-11-30): false alarms, a busy host, clocks, run to run, the harness's cost.

Reads only committed files in benchmarks/results/h200-2026-11-30/: five quiet nights of decode and
prefill (q1-q3 in aa/, q4 in load/, q5 in final/), two nights with every host core spinning (l1 in
load/, l2 in final/), five runs of the run-to-run subset, the poller A/B and the Nsight Compute truth
run. Nights q1-q4 and l1 ran before the fix of the device timer's rate (commit 7d05cdb): their
device clocks carry a per-process factor of up to 12% (their times do not), which the cycle-space
comparisons between them show. Prints one markdown report.

Time: about 6 s on a 2-core CPU machine.
Pass: 0 false regressed/improved among the quiet pairs, and the output equals
benchmarks/results/h200-2026-11-30/analysis.md.

    python benchmarks/evidence/gate_nights.py [--out FILE]
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import statistics as st
import tarfile
from pathlib import Path

from perfci import stats
from perfci.compare import compare
from perfci.compare.noise import clock_exponent
from perfci.results import read_results

HERE = Path(__file__).resolve().parents[1] / "results" / "h200-2026-11-30"
QUIET = {1: HERE / "aa", 2: HERE / "aa", 3: HERE / "aa", 4: HERE / "load", 5: HERE / "final"}
LOADED = {1: HERE / "load", 2: HERE / "final"}


def rows(path: Path) -> dict:
    return {(r["kernel"], r["shape"]): r for r in csv.DictReader(open(path))}


def night(suite: str, name: str) -> Path:
    folder = (QUIET if name.startswith("q") else LOADED)[int(name[1])]
    return folder / f"{suite}-{name}.csv"


def verdict_table(pairs) -> tuple[list[str], int, int, int]:
    lines = ["| suite | base | cur | cases | regressed / improved | inconclusive | suite-wide |",
             "|---|---|---|---:|---:|---:|---|"]
    total = alarms = held = 0
    for suite, a, b in pairs:
        result = compare(read_results(night(suite, a)), read_results(night(suite, b)))
        counts = result.summary.counts
        bad = counts["regressed"] + counts["improved"]
        lines.append(f"| {suite} | {a} | {b} | {len(result.cases)} | {bad} | {counts['inconclusive']} | "
                     f"{result.suite.verdict} |")
        total += len(result.cases)
        alarms += bad
        held += counts["inconclusive"]
    return lines, total, alarms, held


def shift_stats(suite: str, a: str, b: str) -> tuple[float, float, float]:
    """Cases of 10 us and more: median |shift| a -> b, share within 1%, largest |shift|."""
    ra, rb = rows(night(suite, a)), rows(night(suite, b))
    shifts = [abs(100 * (float(rb[k]["median_us"]) / float(ra[k]["median_us"]) - 1))
              for k in ra if float(ra[k]["median_us"]) >= 10]
    return st.median(shifts), sum(s <= 1 for s in shifts) / len(shifts), max(shifts)


def loaded_shift() -> list[str]:
    """Does host load move a case more than two quiet nights move it against each other?"""
    out = ["| suite | pairs | median abs shift, cases >= 10 us (mean; range over pairs) | share within 1% | largest |",
           "|---|---|---:|---:|---:|"]
    quiet = [f"q{i}" for i in QUIET]
    for suite in ("decode", "prefill"):
        for label, pairs in (("quiet - quiet", list(itertools.combinations(quiet, 2))),
                             ("quiet - loaded", [(q, f"l{i}") for q in quiet for i in LOADED])):
            figures = [shift_stats(suite, a, b) for a, b in pairs]
            medians = [f[0] for f in figures]
            out.append(f"| {suite} | {label} ({len(pairs)}) | {st.mean(medians):.2f}% ({min(medians):.2f}-"
                       f"{max(medians):.2f}%) | {100 * st.mean(f[1] for f in figures):.0f}% | "
                       f"{max(f[2] for f in figures):.1f}% |")
    return out


def clocks_quiet_loaded() -> list[str]:
    """After the timer fix: device clocks of a quiet and a loaded night, against NVML's."""
    out = ["| night | suite | device clock, median of repeats | NVML, polled | stalls |", "|---|---|---:|---:|---:|"]
    with tarfile.open(HERE / "final" / "raw.tgz") as archive:
        for name in ("q5", "l2"):
            for suite in ("decode", "prefill"):
                cases = [json.loads(line) for line in archive.extractfile(f"r/{suite}-{name}.jsonl")]
                device = st.median(r["sclk_mhz"] for c in cases for r in c["repeats"] if r.get("sclk_mhz"))
                polled = st.median(r["polled_sclk_mhz"] for c in cases for r in c["repeats"]
                                   if r.get("polled_sclk_mhz"))
                out.append(f"| {name} | {suite} | {device:.0f} MHz | {polled:.0f} MHz | "
                           f"{sum(c.get('stalls', 0) for c in cases)} |")
    return out


def run_to_run() -> list[str]:
    runs = [rows(HERE / "aa" / f"rtr{i}.csv") for i in range(1, 6)]
    out = ["| kernel | shape | mean us | CV of the 5 medians |", "|---|---|---:|---:|"]
    for key in runs[0]:
        medians = [float(r[key]["median_us"]) for r in runs]
        mean = st.mean(medians)
        out.append(f"| {key[0]} | {key[1]} | {mean:.2f} | {100 * st.stdev(medians) / mean:.2f}% |")
    return out


def clock_evidence() -> list[str]:
    """Per-repeat device clocks on prefill: do they carry the slow repeats, and do they narrow intervals?"""
    nights = {i: rows(night("prefill", f"q{i}")) for i in QUIET}
    slowest_low = slowest_total = 0
    narrower = compute_pairs = 0
    for i, table in nights.items():
        for row in table.values():
            times = [float(x) for x in row["repeats_us"].split(";")]
            clocks = [float(x) for x in row["sclk_mhz"].split(";")]
            if (max(times) - min(times)) / st.median(times) < 0.03:
                continue
            slowest_total += 1
            slowest = times.index(max(times))
            slowest_low += clocks[slowest] <= sorted(clocks)[1]  # among the two lowest clocks
    for a, b in itertools.combinations(nights, 2):
        for key, ra in nights[a].items():
            rb = nights[b][key]
            m, n, k = (int(x) for x in key[1].split("x"))
            e = clock_exponent("sm_90", ra["dtype"], m, n, k, 1 if ra["dtype"] == "fp8" else 2, 2)
            if e is None or e < 0.9:
                continue
            ta, tb = ([math.log(float(x)) for x in r["repeats_us"].split(";")] for r in (ra, rb))
            ca, cb = ([math.log(float(x)) for x in r["sclk_mhz"].split(";")] for r in (ra, rb))
            in_time = stats.hodges_lehmann(ta, tb)
            in_cycles = stats.hodges_lehmann([t + c for t, c in zip(ta, ca)], [t + c for t, c in zip(tb, cb)])
            compute_pairs += 1
            narrower += (in_cycles.high - in_cycles.low) <= (in_time.high - in_time.low)
    return [f"- Repeats that scatter by 3% or more: {slowest_total}; in {slowest_low} of them the slowest "
            f"repeat carries one of the two lowest device clocks.",
            f"- Compute-bound A/A pairs (10 pairs of 5 quiet nights): the interval in cycles is no wider "
            f"than in time in {narrower} of {compute_pairs} ({100 * narrower / compute_pairs:.0f}%)."]


def poller() -> list[str]:
    on = [rows(HERE / "load" / f"poll-on{i}.csv") for i in (1, 2)]
    off = [rows(HERE / "load" / f"poll-off{i}.csv") for i in (1, 2)]
    ratios = [st.mean(float(r[k]["median_us"]) for r in on) / st.mean(float(r[k]["median_us"]) for r in off)
              for k in on[0]]
    same = [float(on[0][k]["median_us"]) / float(on[1][k]["median_us"]) for k in on[0]]
    geo = math.exp(st.mean(math.log(r) for r in ratios))
    return [f"- Polling every 10 ms against once per repeat, 9 compute-bound cases, two runs each, ABAB: "
            f"geomean {100 * (geo - 1):+.2f}% (cases {100 * (min(ratios) - 1):+.2f}% to "
            f"{100 * (max(ratios) - 1):+.2f}%); two runs with the same setting differ by "
            f"{100 * (min(same) - 1):+.2f}% to {100 * (max(same) - 1):+.2f}%."]


def cost() -> list[str]:
    out = ["| night | suite | cases | wall in the worker, s | timed GPU work, s (kernels + flushes) | ratio |",
           "|---|---|---:|---:|---:|---:|"]
    with tarfile.open(HERE / "aa" / "raw.tgz") as aa, tarfile.open(HERE / "load" / "raw.tgz") as load:
        final = tarfile.open(HERE / "final" / "raw.tgz")
        for name, archive in (("q1", aa), ("q2", aa), ("q3", aa), ("q4", load), ("q5", final)):
            for suite in ("decode", "prefill"):
                member = archive.extractfile(f"r/{suite}-{name}.jsonl")
                cases = [json.loads(line) for line in member]
                wall = sum(c["wall_s"] for c in cases)
                launches = sum(len(rep["iters_us"]) for c in cases for rep in c["repeats"])
                kernels = sum(sum(rep["iters_us"]) for c in cases for rep in c["repeats"]) / 1e6
                flush_s = launches * 65e-6  # 256 MiB zeroed at ~4.1 TB/s before every launch
                out.append(f"| {name} | {suite} | {len(cases)} | {wall:.1f} | {kernels + flush_s:.1f} | "
                           f"{wall / (kernels + flush_s):.1f}x |")
    return out


def truth() -> list[str]:
    table = list(csv.DictReader(open(HERE / "load" / "truth-ncu.csv")))
    out = ["| kernel | shape | kernels | perfci us | ncu us | perfci/ncu | perfci - ncu, us | ncu MHz |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        ours, ncu = float(r["truth-events.csv_us"]), float(r["ncu_us"])
        out.append(f"| {r['kernel']} | {r['shape']} | {r['kernels_per_launch']} | {ours:.1f} | {ncu:.1f} | "
                   f"{ours / ncu:.3f} | {ours - ncu:+.2f} | {r['ncu_mhz']} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args()
    quiet_pairs = [(s, f"q{a}", f"q{b}") for s in ("decode", "prefill")
                   for a, b in itertools.combinations(QUIET, 2)]
    loaded_pairs = [(s, f"q{a}", f"l{b}") for s in ("decode", "prefill") for a in QUIET for b in LOADED]
    quiet, q_total, q_alarms, q_held = verdict_table(quiet_pairs)
    loaded, l_total, l_alarms, l_held = verdict_table(loaded_pairs)
    text = ["# H200, 2026-11-30: measurement with the device gate", "",
            "Built by `python benchmarks/evidence/gate_nights.py` from the files beside it.", "",
            "## A/A: quiet nights against each other (profile sm_90 as committed)", "", *quiet, "",
            f"All quiet pairs: {q_alarms}/{q_total} regressed or improved, {q_held}/{q_total} "
            f"({100 * q_held / q_total:.1f}%) inconclusive.", "",
            "## A/A: quiet nights against the night with every host core busy", "", *loaded, "",
            f"All loaded pairs: {l_alarms}/{l_total} regressed or improved, {l_held}/{l_total} "
            f"({100 * l_held / l_total:.1f}%) inconclusive.", "",
            "### How far a case moves: quiet against quiet, quiet against loaded", "", *loaded_shift(), "",
            "### Device clocks, quiet and loaded (after the timer fix)", "", *clocks_quiet_loaded(), "",
            "## Run to run: five fresh runs of the subset", "", *run_to_run(), "",
            "## The clock of each repeat (prefill, device counters)", "", *clock_evidence(), "",
            "## What the telemetry poller costs", "", *poller(), "",
            "## What the harness costs", "", *cost(), "",
            "## Against Nsight Compute (one run, `--clock-control none`)", "", *truth(), ""]
    if args.out:
        Path(args.out).write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
