"""Writes the bad-input corpus next to this file from real results in tests/data/compare.

Run from anywhere: python tests/data/bad_inputs/make_corpus.py (the files are committed;
corpus.toml says what each one is and which command reads it).
"""
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path

D = Path(__file__).resolve().parent
sys.path.insert(0, str(D.parents[2]))
from tests.merge.shards import cut, read_rows, write_rows  # noqa: E402

C = D.parent / "compare"
planted = read_rows(C / "h200_planted_base.csv")
cols = list(planted[0])

def variant(name, edit, rows=planted, columns=cols):
    rows = [dict(r) for r in rows]
    edit(rows)
    write_rows(D / name, rows, columns)

def e_tiny(rows):
    rows[0]["median_us"] = "1e-320"; rows[0]["repeats_us"] = ";".join(["1e-320"] * 7)
variant("median-1e-320.csv", e_tiny)
variant("dimension-400-digits.csv", lambda rows: rows[0].update(M="9" * 400))
variant("clock-list-wrong-length.csv", lambda rows: rows[2].update(sclk_mhz=";".join(rows[2]["sclk_mhz"].split(";")[:3])))
variant("throttle-list-wrong-length.csv", lambda rows: rows[3].update(throttled="0;0;0;0;0;0;0;0;0"))
variant("relabelled-device.csv", lambda rows: [r.update(arch="gfx942", device_name="AMD Instinct MI300X") for r in rows])
# duplicate column: the real median first, a second median_us column at the end (csv.DictReader keeps the last)
with open(D / "duplicate-median-column.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(cols + ["median_us"])
    for r in planted:
        w.writerow([r[c] for c in cols] + [f"{float(r['median_us']) * 2:.4f}"])
text = (C / "h200_planted_base.csv").read_text().splitlines()
text[4] = text[4] + ",extra"
(D / "row-with-an-extra-cell.csv").write_text("\n".join(text) + "\n")
fly = (C / "flydsl_base.csv").read_text().splitlines()
fly[3] = "hgemm,4096x4096x4096,bf16,-,1e-300,ok"
(D / "flydsl-throughput-1e-300.csv").write_text("\n".join(fly) + "\n")

pb = json.loads((C / "pb_base.json").read_text())
def pbvariant(name, edit, raw=None):
    doc = json.loads(json.dumps(pb))
    text = edit(doc)
    (D / name).write_text(text if isinstance(text, str) else json.dumps(doc, indent=1) + "\n")
def big_int(doc):
    doc["benchmarks"][0]["stats"].pop("data")
    t = json.dumps(doc, indent=1)
    return t.replace(json.dumps(doc["benchmarks"][0]["stats"]["median"]), "1" + "0" * 400, 1)
pbvariant("pytest-benchmark-400-digit-integer.json", big_int)
def inf_us(doc):
    doc["benchmarks"][0]["stats"]["data"][3] = 1e300
pbvariant("pytest-benchmark-time-1e300-seconds.json", inf_us)
def dup_key(doc):
    t = json.dumps(doc, indent=1)
    # a second "median" in the first stats object: json keeps the last one silently
    return t.replace('"median": ', '"median": 1.0,\n    "median": ', 1)
pbvariant("pytest-benchmark-duplicate-key.json", dup_key)
(D / "pytest-benchmark-nested-100k.json").write_text('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}\n")

prof = json.loads(json.dumps({"name": "gfx950", "arch": "gfx950", "floor_pct": 7.4e296, "unclocked_floor_pct": 2.6,
                              "band_floor_pct": 7.0, "unclocked_band_floor_pct": 7.8, "clock_swing_pct": 14.0,
                              "suite_floor_pct": 3.4, "source": "calibrated", "floor_us": 0.0}))
(D / "profile-floor-7.4e296-percent.json").write_text(json.dumps(prof, indent=2) + "\n")
prof["floor_pct"] = 2.0
(D / "profile-400-digit-integer.json").write_text(json.dumps(prof, indent=2).replace('"floor_us": 0.0', '"floor_us": 1' + "0" * 400) + "\n")

aa = read_rows(C / "aa_cur.csv")
acols = list(aa[0])
def thousand(rows):
    for i, r in enumerate(rows):
        if i % 2:
            r["median_us"] = f"{float(r['median_us']) * 1000:.4f}"
            r["repeats_us"] = ";".join(f"{float(x) * 1000:.4f}" for x in r["repeats_us"].split(";"))
variant("calibrate-not-an-aa-run.csv", thousand, aa, acols)
shutil.copy(C / "aa_cur.csv", D / "calibrate-aa-run.csv")

_, (s1, s2) = cut(C / "h200_planted_base.csv", 2, Path(tempfile.mkdtemp()))
SHA = "7d05cdb6e5b6785d9e039df73998e6f99d8b1f2b"
r1, r2 = ([{**r, "git_sha": SHA} for r in read_rows(s)] for s in (s1, s2))
write_rows(D / "merge-shard-1of2.csv", r1); write_rows(D / "merge-shard-2of2.csv", r2)
write_rows(D / "merge-shard-2of2-overlapping.csv", r2 + r1[:1])
write_rows(D / "merge-shard-2of2-other-device.csv", [{**r, "device_name": "NVIDIA H100"} for r in r2])
write_rows(D / "merge-shard-2of2-other-commit.csv", [{**r, "git_sha": "0123abcd" * 5} for r in r2])
write_rows(D / "merge-shard-2of2-interrupted.csv", r2[:-1])

(D / "suite-weight-nan.toml").write_text('name = "s"\ndevices = ["cpu"]\n\n[[cases]]\nkernel = "torch_matmul"\nM = 16\nN = 16\nK = 32\ndtype = "fp32"\nweight = nan\n')
(D / "suite-empty-list.toml").write_text('name = "s"\ndevices = ["cpu"]\n\n[[cases]]\nkernel = "torch_matmul"\nM = []\nN = 16\nK = 32\ndtype = "fp32"\n')
(D / "suite-nested-20k.toml").write_text('name = "s"\nx = ' + "[" * 20_000 + "]" * 20_000 + "\n")
(D / "suite-5000-digit-integer.toml").write_text('name = "s"\ndevices = ["cpu"]\n\n[[cases]]\nkernel = "torch_matmul"\nM = 1' + "0" * 5000 + '\nN = 16\nK = 32\n')
_suite_of = 'name = "s"\ndevices = ["cpu"]\n\n[[cases]]\nkernel = "{}"\nM = 16\nN = 16\nK = 32\ndtype = "fp32"\n'.format
(D / "suite-kernel-not-importable.toml").write_text(_suite_of("no_such_kernel_library:gemm"))
(D / "suite-kernel-not-a-kernel.toml").write_text(_suite_of("perfci:__version__"))
(D / "perfci-unknown-key.toml").write_text('suite = "bench"\nkernels = ["teamk.gemm"]\n')
(D / "perfci-kernels-not-a-list.toml").write_text('kernels = "teamk.gemm"\n')
(D / "cases-nested-20k.json").write_text('{"cases": ' + "[" * 20_000 + "]" * 20_000 + "}\n")
