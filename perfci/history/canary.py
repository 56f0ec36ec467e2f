"""The nightly canary's record: what each night's detector did with a change of known size, and its rates.

Pure: records in (as :mod:`perfci.history.store` reads them from
``STORE/canary/<run id>.json``), rates and text out. One store holds one device,
so the rates of a store are that device's: how often compare called the
unchanged twin anything but ``unchanged`` (its false-alarm rate), and how often
compare and confirm's paired check found the planted build slower (their power
at the plant's size), each with a Wilson interval, night by night and in total.
What a night's canary is, and why it is measured so: docs/nightly.md#the-canary.
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Iterable, Sequence

from perfci import stats
from perfci.escape import term_text
from perfci.verdict import TESTED, Verdict

FORMAT = "perfci-canary"
SCHEMA = 1
JUDGED = TESTED  # verdicts of a case measured on both sides


@dataclass(frozen=True)
class CanaryNight:
    """One night's canary: the plant's measured size and what each detector said of the two builds.

    A verdict is ``""`` when that detector did not judge (no earlier canary night to
    compare with, or the paired check could not run).
    """

    run_id: str  # the canary's run in the store: runs/<run_id>.csv
    timestamp: str
    sha: str
    device_name: str
    arch: str
    suite: str  # the suite whose night it rode with
    plant_pct: float  # asked for (--canary)
    planted_pct: float  # the share of the K loop actually added (whole iterations)
    shape: str
    dtype: str
    truth_ratio: float | None = None  # planted / twin, paired over tonight's rounds: the change to find
    truth_low: float | None = None
    truth_high: float | None = None
    baseline: str = ""  # what compare judged against: "pooled K nights", "one night", "" (nothing yet)
    twin_verdict: str = ""  # compare: the twin against its own earlier nights (anything but unchanged: an alarm)
    twin_ratio: float | None = None
    twin_low: float | None = None
    twin_high: float | None = None
    plant_verdict: str = ""  # compare: the planted build against the twin's earlier nights
    plant_ratio: float | None = None
    plant_low: float | None = None
    plant_high: float | None = None
    confirm_verdict: str = ""  # confirm's paired statistic on planted vs twin, interleaved tonight
    confirm_ratio: float | None = None
    confirm_low: float | None = None
    confirm_high: float | None = None
    confirm_rounds: int = 0

    @property
    def twin_judged(self) -> bool:
        return self.twin_verdict in JUDGED

    @property
    def false_alarm(self) -> bool:
        """compare did not call the unchanged twin unchanged (it would have gone to confirm, or red)."""
        return self.twin_judged and self.twin_verdict != Verdict.UNCHANGED

    @property
    def compare_found(self) -> bool:
        return self.plant_verdict == Verdict.REGRESSED

    @property
    def compare_flagged(self) -> bool:
        """The weaker reading: compare sent the planted build on to confirm (regressed or inconclusive)."""
        return self.plant_verdict in (Verdict.REGRESSED, Verdict.INCONCLUSIVE)

    @property
    def confirm_found(self) -> bool:
        return self.confirm_verdict == Verdict.REGRESSED

    def to_dict(self) -> dict:
        return {"format": FORMAT, "schema": SCHEMA, **{k: _finite(v) for k, v in asdict(self).items()}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"


def from_dict(data: object, where: str = "canary record") -> CanaryNight:
    """A record read back; ValueError with one line when it is not one this perfci reads."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{where}: not a perfci canary record (its 'format' is not '{FORMAT}')")
    schema = data.get("schema")
    if not isinstance(schema, int) or schema < 1:
        raise ValueError(f"{where}: corrupt canary record ('schema' must be a positive integer)")
    if schema > SCHEMA:
        raise ValueError(f"{where}: canary schema {schema} was written by a newer perfci (this one reads "
                         f"{SCHEMA})")
    known = {f.name: f for f in fields(CanaryNight)}
    values = {k: v for k, v in data.items() if k in known}
    missing = [name for name, f in known.items() if name not in values and f.default is MISSING]
    if missing:
        raise ValueError(f"{where}: corrupt canary record (no {', '.join(missing)})")
    try:
        return CanaryNight(**values)
    except TypeError as err:
        raise ValueError(f"{where}: corrupt canary record ({err})") from None


# --------------------------------------------------------------------------- rates


@dataclass(frozen=True)
class Rate:
    """``hits`` of ``n`` nights, with a Wilson interval (:func:`perfci.stats.wilson`, 95% by default)."""

    name: str
    hits: int
    n: int
    low: float | None = None
    high: float | None = None

    @property
    def rate(self) -> float | None:
        return self.hits / self.n if self.n else None

    def words(self) -> str:
        if not self.n:
            return f"{self.name}: no night judged yet"
        return (f"{self.name} {self.hits}/{self.n} = {100 * self.hits / self.n:.0f}% "
                f"[{100 * (self.low or 0):.0f}%, {100 * (self.high or 0):.0f}%]")


def counted_rate(name: str, hits: int, n: int, confidence: float = 0.95) -> Rate:
    return Rate(name, hits, n, *stats.wilson(hits, n, confidence))


def _rate(name: str, flags: Iterable[bool], confidence: float) -> Rate:
    values = list(flags)
    hits = sum(values)
    return Rate(name, hits, len(values), *stats.wilson(hits, len(values), confidence))


@dataclass(frozen=True)
class Rates:
    """A device's detector, as its canary nights scored it."""

    nights: int
    false_alarm: Rate  # compare: the twin not unchanged
    wrong_red: Rate  # compare: the twin regressed
    compare_power: Rate  # compare: the planted build regressed
    compare_flagged: Rate  # compare: the planted build regressed or inconclusive (sent to confirm)
    confirm_power: Rate  # confirm's paired statistic: the planted build regressed
    truth_pct: float | None  # the median measured size of the plant, percent
    planted_pct: float | None  # the median share of the K loop added, percent

    def lines(self) -> list[str]:
        truth = f"; the plant measured {self.truth_pct:+.1f}% (median)" if self.truth_pct is not None else ""
        return [f"{self.nights} canary night(s){truth}",
                f"compare {self.false_alarm.words()} (of which regressed: {self.wrong_red.hits})",
                f"compare {self.compare_power.words()} (regressed or inconclusive: "
                f"{self.compare_flagged.hits}/{self.compare_flagged.n})",
                f"confirm {self.confirm_power.words()}"]


def rates(nights: Sequence[CanaryNight], confidence: float = 0.95) -> Rates:
    """The detector's rates over these nights; a night a detector did not judge does not count for it."""
    twin = [c for c in nights if c.twin_judged]
    plant = [c for c in nights if c.plant_verdict in JUDGED]
    paired = [c for c in nights if c.confirm_verdict in JUDGED]
    truths = sorted(100.0 * (c.truth_ratio - 1.0) for c in nights if _usable(c.truth_ratio))
    planted = sorted(c.planted_pct for c in nights)
    return Rates(
        nights=len(nights),
        false_alarm=_rate("false alarms", (c.false_alarm for c in twin), confidence),
        wrong_red=_rate("twin regressed", (c.twin_verdict == Verdict.REGRESSED for c in twin), confidence),
        compare_power=_rate("found", (c.compare_found for c in plant), confidence),
        compare_flagged=_rate("flagged", (c.compare_flagged for c in plant), confidence),
        confirm_power=_rate("found", (c.confirm_found for c in paired), confidence),
        truth_pct=_median(truths), planted_pct=_median(planted))


def tonight_line(c: CanaryNight) -> str:
    """One line for the night's reports: the plant's size and each detector's answer."""
    truth = (f"measured {_pct(c.truth_ratio)} [{_pct(c.truth_low)}, {_pct(c.truth_high)}]"
             if _usable(c.truth_ratio) else "its size not measured")
    twin = (f"twin {c.twin_verdict} {_pct(c.twin_ratio)}".rstrip() if c.twin_judged
            else "twin not judged (no earlier canary night)")
    plant = (f"planted {c.plant_verdict} {_pct(c.plant_ratio)}".rstrip() if c.plant_verdict in JUDGED
             else "planted not judged")
    paired = (f"confirm {c.confirm_verdict} {_pct(c.confirm_ratio)} after {c.confirm_rounds} rounds"
              if c.confirm_verdict in JUDGED else "confirm not run")
    return (f"canary +{c.plant_pct:g}% ({c.planted_pct:.1f}% more K iterations; {truth}): "
            f"compare: {twin}, {plant}; {paired}")


# --------------------------------------------------------------------------- the table


def history_rows(nights: Sequence[CanaryNight], confidence: float = 0.95) -> list[dict]:
    """Night by night, oldest first: what each detector said, and the running rates up to that night."""
    out = []
    for i, c in enumerate(nights):
        r = rates(nights[: i + 1], confidence)
        out.append({"timestamp": c.timestamp, "sha": c.sha, "suite": c.suite, "plant_pct": c.plant_pct,
                    "truth_pct": None if not _usable(c.truth_ratio) else 100.0 * (c.truth_ratio - 1.0),
                    "twin": c.twin_verdict, "planted": c.plant_verdict, "confirm": c.confirm_verdict,
                    "false_alarm": _rate_dict(r.false_alarm), "compare_power": _rate_dict(r.compare_power),
                    "confirm_power": _rate_dict(r.confirm_power)})
    return out


def render_table(device: str, store: str, nights: Sequence[CanaryNight], confidence: float = 0.95,
                 team: Rate | None = None) -> str:
    """TEAM: the false alarms of real nights as the team judged them (``invalid`` triage records)."""
    told = [f"real nights, as the team judged them: {team.words()} (triage --as invalid)"] if team else []
    if not nights:
        lines = [f"{store} ({device}): no canary night yet (perfci nightly records one each night it runs one)",
                 *told]
        return "\n".join(term_text(line) for line in lines) + "\n"
    lines = [f"{store} ({device}): {len(nights)} canary night(s); running rates with "
             f"{100 * confidence:.0f}% Wilson intervals",
             f"{'night':<20} {'sha':<12} {'plant':>6} {'truth':>7}  {'twin':<12} {'planted':<12} "
             f"{'confirm':<12} {'false alarms':<18} {'compare power':<18} {'confirm power':<18}"]
    for row in history_rows(nights, confidence):
        truth = "" if row["truth_pct"] is None else f"{row['truth_pct']:+.1f}%"
        lines.append(f"{row['timestamp'][:19]:<20} {row['sha'][:12]:<12} {row['plant_pct']:>5g}% {truth:>7}  "
                     f"{row['twin'] or '-':<12} {row['planted'] or '-':<12} {row['confirm'] or '-':<12} "
                     f"{_short(row['false_alarm']):<18} {_short(row['compare_power']):<18} "
                     f"{_short(row['confirm_power']):<18}")
    lines += ["", *rates(nights, confidence).lines(), *told]
    return "\n".join(term_text(line) for line in lines) + "\n"


def render_json(stores: Sequence[tuple[str, str, Sequence[CanaryNight]]], confidence: float = 0.95,
                team: Sequence[Rate | None] = ()) -> str:
    """``[(store, device, nights), ...]`` as one JSON document (a device per store); TEAM as in render_table."""
    out = []
    for i, (store, device, nights) in enumerate(stores):
        total = rates(nights, confidence)
        judged = team[i] if i < len(team) else None
        out.append({"store": store, "device": device, "nights": [c.to_dict() for c in nights],
                    "team_false_alarm": _rate_dict(judged) if judged is not None else None,
                    "running": history_rows(nights, confidence),
                    "rates": {k: (_rate_dict(v) if isinstance(v, Rate) else v) for k, v in
                              ((f.name, getattr(total, f.name)) for f in fields(Rates))}})
    return json.dumps({"format": "perfci-canary-rates", "schema": 1, "confidence": confidence,
                       "devices": out}, indent=2, allow_nan=False) + "\n"


def rates_dict(r: Rates) -> dict:
    return {f.name: (_rate_dict(getattr(r, f.name)) if isinstance(getattr(r, f.name), Rate)
                     else getattr(r, f.name)) for f in fields(Rates)}


def _rate_dict(r: Rate) -> dict:
    return {"hits": r.hits, "n": r.n, "rate": r.rate, "low": r.low, "high": r.high}


def _short(r: dict) -> str:
    if not r["n"]:
        return "-"
    return f"{r['hits']}/{r['n']} [{100 * r['low']:.0f}-{100 * r['high']:.0f}%]"


def _usable(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def _pct(ratio: float | None) -> str:
    return f"{100.0 * (ratio - 1.0):+.1f}%" if _usable(ratio) else ""


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value
