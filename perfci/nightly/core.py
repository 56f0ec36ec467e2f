"""What a night means: plain data in, a frozen :class:`NightVerdict` out. No files, no processes.

The stages (:mod:`perfci.nightly.stages`) gather an :class:`Outcome`: each
stage's status, tonight's case statuses, compare's verdicts, confirm's, the
culprit. :func:`judge_night` turns it into the exit code and the verdict line, with
one vocabulary for every night:

====  ==================================================================
exit  meaning
====  ==================================================================
0     clean (also: compare's flag was noise, as confirm showed; or an
      undecided case or a config flip without ``--strict``, with a warning)
1     red: a regression (confirmed where confirm ran; a compare
      ``regressed`` that could not be confirmed stays red), a case that
      failed, errored or timed out, a baseline case missing tonight
      (unless ``--allow-missing``), or nothing measured
2     bad input: tonight's results or the baseline could not be used
      (nothing is judged); or, on a night that is otherwise not red, a
      later stage refused its input
3     undecided under ``--strict`` (a config flip too)
4     internal error: a stage crashed (never 1: a crash is not a regression)
130   interrupted
====  ==================================================================
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Mapping, Sequence

from perfci.errors import (EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION,
                           EXIT_USAGE)
from perfci.history.canary import CanaryNight, Rates, rates_dict, tonight_line
from perfci.nightly import NIGHT_BUDGET_S  # noqa: F401 - the night's budget, beside its split below
from perfci.nightly.triaged import CaseTriage, verdict_fields
from perfci.verdict import DECIDED, FAILED_STATUSES, TESTED, Verdict
from perfci.verdict import missing as baseline_missing

STAGES = ("tonight", "baseline", "gate", "canary", "confirm", "bisect", "history", "report")
INPUT_STAGES = ("tonight", "baseline")  # without them nothing can be judged
# Stages that inform and never decide: whatever they meet (a crash, bad input) is a warning, and the
# night's exit code and confirmed_regression are those of the stages that judge. An interrupt still stops it.
INFORMING_STAGES = ("canary", "report")
OK, SKIPPED, FAILED = "ok", "skipped", "failed"
INPUT, INTERNAL, INTERRUPTED = "input", "internal", "interrupted"  # why a stage failed
# Why tonight failed when nothing reached it to judge (no shard arrived): red, exit 1, as "nothing
# measured" is everywhere; not bad input, since every shard job failing is what it usually means.
NOTHING_MEASURED = "nothing measured"
CONFIRMED_VERDICTS = (Verdict.REGRESSED, Verdict.INCONCLUSIVE)  # compare verdicts that confirm measures again
# Against the store's one night, `unchanged` only within this (percent), as the pooled compare's least
# margin: a change inside the one-run floor (±5.4% on sm_90) but past 1% is confirm's to decide.
ONE_NIGHT_UNCHANGED_WITHIN_PCT = 1.0

Key = tuple[str, str, str]


@dataclass(frozen=True)
class Stage:
    """One stage's outcome, as verdict.json records it."""

    name: str
    status: str  # ok | skipped | failed
    detail: str = ""
    seconds: float = 0.0
    error: str = ""  # failed only: input | internal | interrupted | nothing measured

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "seconds": round(self.seconds, 1), "error": self.error or None}


@dataclass(frozen=True)
class Judged:
    """compare's verdict on one case (one run or pooled nights against tonight)."""

    kernel: str
    shape: str
    dtype: str
    verdict: str
    reason: str = ""
    base_us: float | None = None
    cur_us: float | None = None
    ratio: float | None = None  # judged cur/base (adjusted where compare adjusts), > 1 slower
    ci_low: float | None = None
    ci_high: float | None = None
    explain: str = ""  # compare --explain's reading of a regressed / improved case
    explain_sides: tuple[tuple[str, str, str], ...] = ()  # (what, base, tonight), as compare --explain
    # config-flip: (config, where it ran, its median us) of each config launched, and how to pin it
    flip: tuple[tuple[str, str, float | None], ...] = ()
    flip_pin: str = ""

    @property
    def key(self) -> Key:
        return (self.kernel, self.shape, self.dtype)


@dataclass(frozen=True)
class Confirmed:
    """confirm's verdict on one flagged case: interleaved rounds of GOOD and tonight."""

    kernel: str
    shape: str
    dtype: str
    verdict: str  # regressed | improved | unchanged | inconclusive
    reason: str = ""
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    rounds: int = 0

    @property
    def key(self) -> Key:
        return (self.kernel, self.shape, self.dtype)


@dataclass(frozen=True)
class Culprit:
    sha: str
    subject: str
    diffstat: str = ""


@dataclass(frozen=True)
class Gate:
    """Tonight's red flags that need no statistics."""

    broken: tuple[tuple[Key, str], ...]  # (case, status) of every fail/error/timeout
    missing: tuple[Key, ...]  # baseline cases absent tonight
    nothing_measured: bool
    allow_missing: bool
    incomplete: str = ""  # why tonight's shards do not hold every case their run selected

    @property
    def red(self) -> bool:
        lost = bool(self.missing) or bool(self.incomplete)
        return bool(self.broken) or (lost and not self.allow_missing) or self.nothing_measured

    def reasons(self) -> list[str]:
        out = []
        if self.nothing_measured:
            out.append("nothing measured (no case ended ok)")
        if self.broken:
            out.append(f"{len(self.broken)} case(s) broken ({_cases([k for k, _ in self.broken], 3)}: "
                       f"{', '.join(sorted({s for _, s in self.broken}))})")
        if self.missing and not self.allow_missing:
            out.append(f"{len(self.missing)} baseline case(s) missing tonight ({_cases(self.missing, 3)})")
        if self.incomplete and not self.allow_missing:
            out.append(f"tonight's run is incomplete: {self.incomplete}")
        return out


@dataclass(frozen=True)
class Outcome:
    """Everything a night found out; what :func:`judge_night` and the renderers read."""

    suite: str = ""
    device: str = ""  # "NVIDIA H200 (sm_90)"
    arch: str = ""
    sha: str = ""  # tonight's commit
    good_sha: str = ""  # what confirm and bisect compared tonight with
    stages: tuple[Stage, ...] = ()
    tonight: tuple[tuple[Key, str], ...] = ()  # (case, status) of tonight's run
    incomplete: str = ""  # tonight's shards lack cases their run selected (a shard missing or cut short)
    first_night: bool = False
    baseline: str = ""  # what tonight was judged against, in words
    cases: tuple[Judged, ...] | None = None  # None: compare did not run
    compare_suite: str = "n/a"  # compare's suite-wide verdict
    compare_notes: tuple[str, ...] = ()
    flagged: tuple[Key, ...] = ()
    confirmed: tuple[Confirmed, ...] | None = None  # None: confirm did not run
    confirm_suite: str = "n/a"
    culprit: Culprit | None = None
    bisect_denied: str = ""  # bisect measured GOOD -> BAD and found no step past the floor, or swapped
    history_appended: bool = False
    allow_missing: bool = False
    strict: bool = False
    notes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # plots and reports written into DIR (names relative to it)
    canary: CanaryNight | None = None  # tonight's canary (perfci.nightly.canary); None: none measured
    canary_rates: Rates | None = None  # the store's canary nights and tonight's
    warnings: tuple[str, ...] = ()  # what the canary and the report stage met: warnings, never the verdict
    triage: tuple[CaseTriage, ...] = ()  # tonight's cases a triage record names (perfci.nightly.triaged)
    toolchain: tuple[tuple[str, str, str], ...] = ()  # (what, baseline's, tonight's) that moved

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)


@dataclass(frozen=True)
class NightVerdict:
    """What a night comes to: its exit code, whether a regression was confirmed, the verdict line."""

    exit_code: int
    confirmed_regression: bool
    headline: str
    warnings: tuple[str, ...] = ()
    gate: Gate | None = None


# --------------------------------------------------------------------------- the pieces


def gate(tonight: Sequence[tuple[Key, str]], cases: Sequence[Judged] | None, allow_missing: bool,
         incomplete: str = "") -> Gate:
    broken = tuple((k, s) for k, s in tonight if s in FAILED_STATUSES)
    # The nightly's rule of perfci.verdict.missing: only a case absent tonight. One that failed is red as
    # broken; one skipped tonight is not counted (compare's rule would count it).
    missing = tuple(baseline_missing(cases or (), count_skipped=False, require_base_ok=False))
    measured = any(s == "ok" for _, s in tonight)
    return Gate(broken, missing, not measured, allow_missing, incomplete)


def flagged(cases: Sequence[Judged], suite_verdict: str = "n/a") -> tuple[Key, ...]:
    """The cases confirm measures again: those compare did not call unchanged (and could judge).

    ``improved`` is not confirmed (it cannot fail the gate). A suite-wide
    regression flags every case judged on both sides: confirm takes the suite's
    shift out of its cases and judges it on its own.
    """
    wanted = TESTED if suite_verdict == Verdict.REGRESSED else CONFIRMED_VERDICTS
    return tuple(c.key for c in cases if c.verdict in wanted)


def baseline_plan(store_nights: int, has_baseline_csv: bool) -> str:
    """What tonight is judged against.

    ``pooled``: 2+ nights of this suite in the store (pooling needs 2);
    ``csv``: the committed --baseline; ``night``: the store's one night, as a
    one-run baseline; ``first``: nothing yet.
    """
    if store_nights >= 2:
        return "pooled"
    if has_baseline_csv:
        return "csv"
    return "night" if store_nights == 1 else "first"


def strip_dirty(sha: str) -> str:
    return sha[: -len("-dirty")] if sha.endswith("-dirty") else sha


def good_sha_problem(good: str, tonight: str, good_known: bool, tonight_known: bool) -> str:
    """Why GOOD and tonight's commits cannot be measured against each other ("" when they can)."""
    if not good:
        return "the baseline names no commit (empty git_sha)"
    if not tonight:
        return "tonight's commit is unknown"
    if not good_known:
        return f"the baseline's commit {good[:12]} is not in the repository"
    if not tonight_known:
        return f"tonight's commit {tonight[:12]} is not in the repository"
    if strip_dirty(good) == strip_dirty(tonight):
        return f"the baseline was measured at tonight's commit {good[:12]}: nothing to measure against"
    return ""


def worst(confirmed: Sequence[Confirmed]) -> Confirmed | None:
    """The confirmed regression to bisect: the largest slowdown."""
    slow = [c for c in confirmed if c.verdict == Verdict.REGRESSED]
    if not slow:
        return None
    return max(slow, key=lambda c: (c.ratio or 0.0, c.key))


def _cases(keys: Sequence[Key], limit: int) -> str:
    names = [" ".join(k) for k in keys[:limit]]
    return ", ".join(names) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{100.0 * (ratio - 1.0):+.1f}%"


# --------------------------------------------------------------------------- the decision


def judge_night(o: Outcome) -> NightVerdict:
    """The exit code, whether a regression was confirmed, the verdict line and the warnings.

    Only the stages that judge decide: a failed canary or report stage, and whatever
    they noted (``o.warnings``), are warnings added to the decision, never its code.
    """
    informing = [s for s in o.stages if s.status == FAILED and s.name in INFORMING_STAGES
                 and s.error != INTERRUPTED]
    verdict = _judge_night(o, [s for s in o.stages if s.status == FAILED and s not in informing])
    extra = tuple(_informing_failure(s) for s in informing) + tuple(o.warnings)
    return replace(verdict, warnings=verdict.warnings + extra) if extra else verdict


def _informing_failure(s: Stage) -> str:
    what = "the detector was not checked tonight" if s.name == "canary" else "the reports may lack its part"
    return f"stage {s.name} failed ({s.error}): {s.detail}; {what}, the night's verdict stands"


def _judge_night(o: Outcome, failed: list[Stage]) -> NightVerdict:
    for kind, code, words in ((INTERRUPTED, EXIT_INTERRUPTED, "was interrupted"),
                              (INTERNAL, EXIT_INTERNAL, "crashed")):
        hit = next((s for s in failed if s.error == kind), None)
        if hit is not None:
            return NightVerdict(code, False, f"stage {hit.name} {words}: {hit.detail}", _later_failures(failed, hit))
    empty = next((s for s in failed if s.error == NOTHING_MEASURED), None)
    if empty is not None:
        return NightVerdict(EXIT_REGRESSION, False, f"nothing measured: {empty.detail}",
                            _later_failures(failed, empty))
    early = next((s for s in failed if s.name in INPUT_STAGES), None)
    if early is not None:
        return NightVerdict(EXIT_USAGE, False, f"bad input in stage {early.name}: {early.detail}")

    g = gate(o.tonight, o.cases, o.allow_missing, o.incomplete)
    warnings: list[str] = []
    cases = o.cases or ()
    compare_regressed = [c for c in cases if c.verdict == Verdict.REGRESSED]
    suite_regressed = o.compare_suite == Verdict.REGRESSED
    red: list[str] = []
    confirmed_regression = False
    if o.confirmed is not None:
        slow = [c for c in o.confirmed if c.verdict == Verdict.REGRESSED]
        undecided = [c.key for c in o.confirmed if c.verdict == Verdict.INCONCLUSIVE]
        # Measured on one side and never on the other: a crash, a failed check or a hang is red with
        # its reason, never "too few rounds".
        red.extend(f"broken in confirm: {' '.join(c.key)}: {c.reason}"
                   for c in o.confirmed if c.verdict == Verdict.BROKEN)
        confirmed_regression = bool(slow) or o.confirm_suite == Verdict.REGRESSED
        if confirmed_regression:
            top = worst(o.confirmed)
            what = f"{' '.join(top.key)} {_pct(top.ratio)}" if top else "the suite as a whole"
            extra = f" and {len(slow) - 1} more" if len(slow) > 1 else ""
            culprit = f"; culprit {o.culprit.sha[:12]} {o.culprit.subject!r}" if o.culprit else ""
            red.append(f"regression confirmed: {what}{extra}{culprit}")
        elif o.confirm_suite == Verdict.INCONCLUSIVE:
            # Confirm judged the cases relative to a shift they share, and could not judge that
            # shift: their "unchanged" says nothing about tonight against the good night.
            shared = [c for c in compare_regressed if c.key in {k.key for k in o.confirmed}]
            if shared or suite_regressed:
                what = _cases([c.key for c in shared], 3) if shared else "the suite as a whole"
                red.append(f"regression (compare; not confirmed: confirm could not decide the shift "
                           f"the flagged cases share): {what}")
        else:
            cleared = [c.key for c in o.confirmed if c.verdict in (Verdict.UNCHANGED, Verdict.IMPROVED)]
            if cleared:
                warnings.append(f"compare flagged {_cases(cleared, 3)}; confirm measured "
                                f"{'it' if len(cleared) == 1 else 'them'} against {o.good_sha[:12]} and "
                                f"found no slowdown: compare's flag was noise")
        # A flagged case confirm gave no verdict on (it did not measure ok there) keeps compare's.
        answered = {c.key for c in o.confirmed}
        unanswered = [c for c in cases if c.key in o.flagged and c.key not in answered]
        if any(c.verdict == Verdict.REGRESSED for c in unanswered):
            names = _cases([c.key for c in unanswered if c.verdict == Verdict.REGRESSED], 3)
            red.append(f"regression (compare; confirm gave no verdict on it): {names}")
        undecided += [c.key for c in unanswered if c.verdict == Verdict.INCONCLUSIVE]
    else:
        undecided = [c.key for c in cases if c.verdict == Verdict.INCONCLUSIVE]
        if compare_regressed or suite_regressed:
            why = _skip_reason(o)
            what = _cases([c.key for c in compare_regressed], 3) if compare_regressed else "the suite as a whole"
            red.append(f"regression (compare; not confirmed: {why}): {what}")
    if o.compare_suite == Verdict.INCONCLUSIVE and o.confirm_suite not in DECIDED:
        undecided = [*undecided, ("suite-wide shift", "", "")]
    red.extend(g.reasons())
    # A flip is the autotuner's choice, not the code's: never red, never confirmed; --strict holds it as undecided.
    # Confirm's too: its two sides each autotuned once, and chose two configs of one source.
    flips = [c.key for c in (*cases, *(o.confirmed or ())) if c.verdict == Verdict.CONFIG_FLIP]
    flip_line = f"config flip: {_cases(flips, 3)} launched another config with the kernel source unchanged"
    if flips:
        warnings.append(f"{flip_line}: the autotuner's choice, not a regression; pin the config (Config flips)")
    if g.missing and g.allow_missing:
        warnings.append(f"{len(g.missing)} baseline case(s) missing tonight, allowed by --allow-missing "
                        f"({_cases(g.missing, 3)})")
    if g.incomplete and g.allow_missing:
        warnings.append(f"tonight's run is incomplete ({g.incomplete}), allowed by --allow-missing")
    later = [s for s in failed if s.name not in INPUT_STAGES]
    if confirmed_regression and o.bisect_denied and not g.reasons() and \
            not any(line.startswith("broken in confirm") for line in red):
        # Two measurements of one pair disagree: not red on confirm's word alone, not green either.
        top = worst(o.confirmed or ())
        what = f"{' '.join(top.key)} {_pct(top.ratio)}" if top else "the suite as a whole"
        return NightVerdict(EXIT_INCONCLUSIVE, False,
                            f"undecided: confirm called {what} regressed, but bisect's own GOOD -> BAD rounds "
                            f"{o.bisect_denied}: measure again (tomorrow's night, or a larger --budget)",
                            tuple(warnings), g)
    if red:
        warnings.extend(f"stage {s.name} failed: {s.detail}" for s in later)
        return NightVerdict(EXIT_REGRESSION, confirmed_regression, "; ".join(red), tuple(warnings), g)
    if later:
        warnings.extend(f"stage {s.name} failed: {s.detail}" for s in later[1:])
        return NightVerdict(EXIT_USAGE, False, f"bad input in stage {later[0].name}: {later[0].detail}",
                        tuple(warnings), g)
    # compare called these slower and confirm, measuring again, could neither show it nor clear
    # it: a green night here would be green by accident, so it ends undecided (3) without --strict.
    held = [k for k in undecided if k in {c.key for c in compare_regressed}]
    if held:
        names = _cases(held, 3)
        return NightVerdict(EXIT_INCONCLUSIVE, False,
                        f"undecided: {names} regressed in compare, inconclusive in confirm: not green until "
                        f"measured again (a larger confirm --budget, or tomorrow's night)", tuple(warnings), g)
    if undecided:
        names = " ".join(k for k in undecided[0] if k)
        more = f" and {len(undecided) - 1} more" if len(undecided) > 1 else ""
        line = f"undecided: {names}{more} inconclusive"
        if o.strict:
            return NightVerdict(EXIT_INCONCLUSIVE, False, f"{line} (--strict)", tuple(warnings), g)
        warnings.append(f"{line}; not a failure without --strict: look again tomorrow")
    if flips and o.strict:
        return NightVerdict(EXIT_INCONCLUSIVE, False, f"undecided: {flip_line} (--strict)", tuple(warnings), g)
    return NightVerdict(EXIT_OK, False, _clean_line(o, cases), tuple(warnings), g)


def _later_failures(failed: Sequence[Stage], first: Stage) -> tuple[str, ...]:
    return tuple(f"stage {s.name} failed: {s.detail}" for s in failed if s is not first)


def _skip_reason(o: Outcome) -> str:
    stage = o.stage("confirm")
    if stage is None or not stage.detail:
        return "confirm did not run"
    return stage.detail


def _clean_line(o: Outcome, cases: Sequence[Judged]) -> str:
    if o.first_night:
        if o.history_appended:
            return f"first night on {o.device or 'this device'}: recorded as the baseline; nothing judged"
        stored = o.stage("history")
        if stored is not None and stored.status == SKIPPED and "already in" in stored.detail:
            return f"first night on {o.device or 'this device'}: {stored.detail}; nothing judged"
        return (f"first night on {o.device or 'this device'}: no history store and no --baseline, so "
                f"nothing judged; run.csv can become the baseline")
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    told = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"clean: {told or 'no case compared'}"


def verdict_dict(o: Outcome, d: NightVerdict) -> dict:
    """verdict.json's content (render.py writes it)."""
    g = d.gate
    return {
        "format": "perfci-nightly-verdict", "schema": 1,
        "exit_code": d.exit_code, "confirmed_regression": d.confirmed_regression, "verdict": d.headline,
        "warnings": list(d.warnings), "suite": o.suite, "device": o.device, "arch": o.arch, "sha": o.sha,
        "good_sha": o.good_sha or None, "baseline": o.baseline, "first_night": o.first_night,
        "stages": [s.to_dict() for s in o.stages],
        "gate": None if g is None else {
            "broken": [{"case": list(k), "status": s} for k, s in g.broken],
            "missing": [list(k) for k in g.missing], "allow_missing": g.allow_missing,
            "incomplete": g.incomplete or None, "nothing_measured": g.nothing_measured},
        "cases": None if o.cases is None else [asdict(c) for c in o.cases],
        "compare_suite_shift": o.compare_suite,
        "flagged": [list(k) for k in o.flagged],
        "confirmed": None if o.confirmed is None else [asdict(c) for c in o.confirmed],
        "confirm_suite_shift": o.confirm_suite,
        "culprit": None if o.culprit is None else asdict(o.culprit),
        "history_appended": o.history_appended,
        "canary": None if o.canary is None else {
            "line": tonight_line(o.canary), "tonight": o.canary.to_dict(),
            "rates": None if o.canary_rates is None else rates_dict(o.canary_rates),
            "rates_lines": [] if o.canary_rates is None else o.canary_rates.lines()},
        "notes": list(o.notes), "files": list(o.files),
        **verdict_fields(o.triage, o.cases, o.confirmed, d.confirmed_regression),
        "toolchain_moved": [{"what": w, "baseline": b, "tonight": t} for w, b, t in o.toolchain],
    }


# --------------------------------------------------------------------------- the night's budget

MIN_STAGE_S = 60.0  # confirm or bisect always gets this much, however late it starts: a verdict, not a hang
CONFIRM_SHARE = 0.5  # of what is left when confirm starts, when bisect may follow; the rest is bisect's
REPORT_RESERVE_S = 30.0  # kept back from bisect for the history, the plots and the reports


def stage_budget(stage: str, night_budget_s: float, elapsed_s: float, bisect_follows: bool,
                 stage_default_s: float) -> float:
    """Seconds ``stage`` ("confirm" or "bisect") may measure, out of the night's budget.

    confirm takes :data:`CONFIRM_SHARE` of what is left when bisect may follow
    (all but the report reserve otherwise), never more than its own default;
    bisect takes what is left less the report reserve. Each gets at least
    :data:`MIN_STAGE_S`, so a night that ran late still ends with a verdict,
    undecided if need be (exit 3), rather than going on past its budget for long.
    """
    left = night_budget_s - elapsed_s - REPORT_RESERVE_S
    if stage == "confirm":
        share = left * CONFIRM_SHARE if bisect_follows else left
        return max(MIN_STAGE_S, min(stage_default_s, share))
    return max(MIN_STAGE_S, left)


def confirm_floor(report: Mapping) -> float | None:
    """The floor confirm judged with (its JSON summary's ``min_effect_pct``), when it says one."""
    value = (report.get("summary") or {}).get("min_effect_pct")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
