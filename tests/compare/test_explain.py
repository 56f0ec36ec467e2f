"""compare's explanation of a regressed / improved case: the reading rules on constructed rows, and the CLI."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from perfci.compare.explain import explain_case
from perfci.model import KernelRecord, ResultRow

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
LAUNCH = (("grid", "3584x1x1"), ("BLOCK_M", "128"), ("BLOCK_N", "256"), ("num_warps", "8"), ("num_stages", "3"))
RES = (("regs", "168"), ("spills", "0"), ("shared", "98304"), ("occupancy", "8"), ("occ_limit", "registers"))


def row(launch=LAUNCH, resources=RES, clock=1800.0, power=550.0, throttled=False, kernel="matmul_tiled",
        recorded=True, **software) -> ResultRow:
    kernels = (KernelRecord(f"{kernel}_kernel", launch, resources),) if recorded else ()
    return ResultRow(kernel=kernel, shape="4096x4096x4096", dtype="bf16", status="ok", sclk_mhz=(clock,) * 7,
                     power_w=(power,) * 7, throttled=(throttled,) * 7, kernels=kernels,
                     **{"driver": "580", "runtime": "cuda 13.0", "torch": "2.11", "triton": "3.6", **software})


def with_(pairs, **changes):
    return tuple((k, changes.get(k, v)) for k, v in pairs)


def test_spills_and_lower_occupancy_read_as_register_pressure():
    ex = explain_case("matmul_tiled", row(), row(resources=with_(RES, regs="255", spills="24", occupancy="4")))
    assert ex.cause == "registers"
    assert ex.reading == "spills 0 -> 24 and occupancy 8 -> 4: register pressure"
    assert ("spills", "0", "24") in ex.sides


def test_unchanged_kernel_and_a_lower_clock_read_as_the_device():
    ex = explain_case("matmul_tiled", row(), row(clock=1638.0))
    assert (ex.cause, ex.reading) == ("device", "resources and launch unchanged, clock -9%: the device")


def test_a_power_capped_kernel_whose_clock_fell_as_its_power_rose_is_not_the_device():
    ex = explain_case("matmul_tiled", row(throttled=True), row(clock=1500.0, power=690.0, throttled=True))
    assert ex.cause == "power" and "power rose 550 -> 690 W" in ex.reading and "not the device" in ex.reading


def test_a_config_change_is_named_before_what_follows_from_it():
    cur = row(launch=with_(LAUNCH, BLOCK_N="128", grid="7168x1x1"), resources=with_(RES, shared="65536"))
    ex = explain_case("matmul_tiled", row(), cur)
    assert ex.cause == "config"
    assert ex.reading == "config changed (BLOCK_N 256 -> 128); shared memory 96 KiB -> 64 KiB"


def test_more_shared_memory_and_a_grid_change_each_have_their_reading():
    more = explain_case("matmul_tiled", row(), row(resources=with_(RES, shared="131072", occupancy="4")))
    assert more.reading == "shared memory 96 KiB -> 128 KiB and occupancy 8 -> 4: shared memory"
    grid = explain_case("matmul_tiled", row(), row(launch=with_(LAUNCH, grid="132x1x1")))
    assert (grid.cause, grid.reading) == ("launch", "grid 3584x1x1 -> 132x1x1: the launch")


def test_nothing_changed_points_at_the_code_and_vendor_cases_at_the_library():
    same = explain_case("matmul_tiled", row(), row())
    assert same.cause == "code" and same.reading.startswith("resources, launch, clocks and versions unchanged")
    vendor = explain_case("torch_matmul", row(kernel="torch_matmul", recorded=False),
                          row(kernel="torch_matmul", recorded=False))
    assert (vendor.cause, vendor.reading) == ("vendor", "nothing in the kernel changed: look at inputs or the "
                                                        "vendor library")
    newer = explain_case("torch_matmul", row(kernel="torch_matmul", recorded=False),
                         row(kernel="torch_matmul", recorded=False, torch="2.12"))
    assert newer.reading == "nothing in the kernel changed, torch 2.11 -> 2.12: the vendor library"


def test_a_changed_source_with_the_launch_unchanged_reads_as_the_code_and_the_cpu_s_records_say_what_they_lack():
    def source(text, resources=RES):
        return replace(row(), kernels=(KernelRecord("matmul_tiled_kernel", LAUNCH, resources, text),))

    ex = explain_case("matmul_tiled", source("aaaa"), source("bbbb"))
    assert (ex.cause, ex.reading) == ("code", "the kernel's source changed, its launch did not: the kernel's "
                                              "code; bisect it")
    assert ("source", "aaaa", "bbbb") in ex.sides
    # The interpreter: launch and source recorded, no resources; the source unchanged.
    cpu = explain_case("matmul_tiled", source("aaaa", ()), source("aaaa", ()))
    assert cpu.reading.startswith("launch (no compiled resources on the CPU), clocks and versions unchanged")


def test_old_files_without_resources_say_so():
    ex = explain_case("matmul_tiled", row(recorded=False), row(recorded=False))
    assert ex.cause == "unknown" and ex.reading.startswith("no compiled resources recorded")
    assert ("clock MHz", "1800", "1800") in ex.sides and not any(w == "spills" for w, _, _ in ex.sides)


def test_cli_explains_the_planted_spill_in_table_markdown_and_json(capsys):
    from perfci.cli import main

    base, cur = str(DATA / "h200_explain_base.csv"), str(DATA / "h200_explain_cur.csv")
    assert main(["compare", base, cur, "--explain"]) == 1
    table = capsys.readouterr().out
    assert ("explain matmul_tiled 4096x28672x4096 bf16 (regressed): spills 0 -> 24 and occupancy 8 -> 4: "
            "register pressure") in table
    assert main(["compare", base, cur]) == 1
    assert "\nexplain " not in capsys.readouterr().out  # the table adds it only when asked
    main(["compare", base, cur, "--format", "markdown"])
    md = capsys.readouterr().out
    assert "**why `matmul_tiled` 4096x28672x4096 bf16 regressed:** spills 0 -> 24" in md
    assert "| **spills** | 0 | 24 |" in md
    main(["compare", base, cur, "--format", "json"])
    cases = {(c["kernel"], c["shape"]): c for c in json.loads(capsys.readouterr().out)["cases"]}
    tiled = cases[("matmul_tiled", "4096x28672x4096")]["explain"]
    assert tiled["cause"] == "registers" and tiled["base"]["spills"] == "0" and tiled["cur"]["spills"] == "24"
    persistent = cases[("matmul_persistent", "4096x28672x4096")]["explain"]
    assert persistent["cause"] == "power"  # its resources did not change; it drew more power at a lower clock
    assert all(c["explain"] is None for c in cases.values() if c["verdict"] not in ("regressed", "improved"))
