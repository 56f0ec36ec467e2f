"""Two large perfci results CSVs (BASE and CUR) for timing ``perfci compare`` on many rows.

Every row is a distinct case (kernel ``gemm_K``, shapes MxNxK over a grid) with seven
repeats and clocks, as a real run writes them; CUR is BASE with seeded noise, and one
case in 1000 made 10% slower, so the compare has cases to flag (at 100k cases they are
``inconclusive``: 7 repeats a side cannot reach the p-value Benjamini-Hochberg asks of
one case in 100k). Deterministic for a given ``--rows`` and ``--seed``.

    python benchmarks/make_large_results.py --rows 100000 --out /tmp/big
    /usr/bin/time -v perfci compare /tmp/big/base.csv /tmp/big/cur.csv --format json > /dev/null

Time: about 2 s per 100k rows on a 2-core CPU machine; 100k rows are 20 MiB a file.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

COLUMNS = ("kernel,shape,dtype,M,N,K,median_us,repeats_us,iters,tflops,tbps,roofline_pct,sclk_mhz,temp_c,"
           "power_w,throttled,status,message,weight,group,rel_error,arch,device_name,vendor,driver,runtime,"
           "torch,triton,perfci,git_sha,host,timestamp,suite,schema")
SIDES = {"base": "0" * 40, "cur": "1" * 40}


def row(index: int, rng: random.Random, slower: float, sha: str) -> str:
    kernel = f"gemm_{index // 4096}"
    m, n, k = 1 + index % 64, 64 * (1 + (index // 64) % 64), 4096
    base_us = 5.0 + (index % 997) / 10.0
    repeats = [base_us * slower * (1 + rng.gauss(0, 0.004)) for _ in range(7)]
    median = sorted(repeats)[3]
    clocks = ";".join(str(2200 + rng.randrange(-20, 21)) for _ in range(7))
    return (f"{kernel},{m}x{n}x{k},bf16,{m},{n},{k},{median:.4f},{';'.join(f'{r:.4f}' for r in repeats)},50,,,,"
            f"{clocks},,,,ok,,1,,,gfx950,AMD Instinct MI355X,amd,,,,,,{sha},,,large,1")


def write(path: Path, rows: int, seed: int, side: str) -> None:
    rng = random.Random(f"{seed}-{side}")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(COLUMNS + "\n")
        for index in range(rows):
            slower = 1.10 if side == "cur" and index % 1000 == 7 else 1.0
            fh.write(row(index, rng, slower, SIDES[side]) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="cases in each file (default 100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="folder for base.csv and cur.csv")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for side in SIDES:
        write(args.out / f"{side}.csv", args.rows, args.seed, side)
    print(f"wrote {args.out / 'base.csv'} and {args.out / 'cur.csv'}, {args.rows} rows each")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
