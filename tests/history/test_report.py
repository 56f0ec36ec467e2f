"""`perfci history plot` and `report`: PNGs, a static site whose links resolve, and a real browser's view of it."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfci.history import store
from tests.history.synth import write_night

ROOT = Path(__file__).resolve().parents[2]
STEP = ("matmul_tiled", "4096x6144x768", "bf16")
PNG = b"\x89PNG\r\n\x1a\n"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("site")
    files = [write_night(d / f"n{i}.csv", i, slow={STEP: 1.05} if i >= 6 else None,
                         only={STEP, ("matmul_tiled", "1x1024x6144", "bf16")}) for i in range(12)]
    files.append(write_night(d / "p.csv", 0, suite="prefill", only={("splitk_decode[m_fast=1]", "64x6144x768", "bf16")}))
    store.add_runs(d / "st", [str(f) for f in files])
    r = perfci("history", "report", d / "st", "--out", d / "out")
    assert r.returncode == 0, r.stderr
    return d


def test_plot_writes_one_png_per_case(site):
    r = perfci("history", "plot", site / "st", "--out", site / "png")
    assert r.returncode == 0 and "wrote 3 trend PNG(s)" in r.stdout
    pngs = sorted((site / "png").iterdir())
    assert len(pngs) == 3 and all(p.read_bytes()[:8] == PNG for p in pngs)
    r = perfci("history", "plot", site / "st", "--out", site / "none", "--filter", "no-such-kernel")
    assert r.returncode == 2 and "no case to draw" in r.stderr


def test_report_pages_link_to_files_that_exist(site):
    out = site / "out"
    index = (out / "index.html").read_text()
    assert "NVIDIA H200 (sm_90)" in index and 'href="suite-decode.html"' in index and "suite-prefill.html" in index
    pages = [out / "index.html", *out.glob("suite-*.html"), *(out / "cases").glob("*.html")]
    assert len(pages) == 1 + 2 + 3
    for page in pages:
        for target in re.findall(r'(?:href|src)="([^"#]+)"', page.read_text()):
            assert (page.parent / target).resolve().is_file(), (page.name, target)
    decode = (out / "suite-decode.html").read_text()
    assert decode.index("matmul_tiled 4096x6144x768 bf16") < decode.index("matmul_tiled 1x1024x6144 bf16")
    case = next((out / "cases").glob("matmul_tiled_4096x6144x768*.html")).read_text()
    assert "Change points" in case and "0606060606" in case and 'class="up">+5.' in case
    short = next((out / "cases").glob("splitk*.html")).read_text()
    assert "too short to search" in short


def _browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def test_the_report_renders_in_headless_chromium(site, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip(f"no headless browser on PATH ({', '.join(BROWSERS)}); "
                    "on Debian/Ubuntu CI: apt-get install -y --no-install-recommends chromium")
    shot = tmp_path / "shot.png"
    page = site / "out" / "suite-decode.html"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1100,800", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file() and shot.read_bytes()[:8] == PNG, proc.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))[..., :3]
    assert pixels.shape[0] >= 700 and pixels.shape[1] >= 1000
    ink = np.mean(np.any(pixels < 0.85, axis=-1))  # share of pixels that are not (near) white
    assert 0.01 < ink < 0.9, ink  # text, table rules and the trend thumbnails, on a white page
    blue = np.mean((pixels[..., 2] > 0.6) & (pixels[..., 0] < 0.5))  # link text and the noise bands
    assert blue > 0.001, blue


def test_the_trend_draws_each_night_as_the_checks_judge_it():
    # Repeats whose median sits above their fastest half (a slow tail): the dot is the fastest half's
    # mean, the value change points were found on, not the median.
    import math

    from perfci.history.changepoints import detect
    from perfci.history.model import CaseSeries, Point
    from perfci.history.plot import night_values, trend_png

    nights = [(10.0, 10.0, 10.0, 12.0, 12.0, 12.0, 12.0), (10.0, 10.2, 10.1, 13.0, 13.0, 13.0, 13.0),
              (10.1, 10.0, 10.0, 12.5, 12.5, 12.5, 12.5)]
    points = tuple(Point(i, f"r{i}", "a" * 40, f"2026-11-0{i + 1}T02:00:00Z", sorted(r)[3], r)
                   for i, r in enumerate(nights))
    series = CaseSeries("gemv", "1x8x16", "fp32", "tiny", points)
    values = night_values(series)
    fastest = [math.exp(sum(math.log(x) for x in sorted(r)[:3]) / 3) for r in nights]
    assert values == pytest.approx(fastest) and all(v < p.median_us for v, p in zip(values, points))
    png = trend_png(series, detect(series.medians, None, [p.repeats_us for p in points]))
    assert png.startswith(b"\x89PNG")
