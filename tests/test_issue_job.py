"""The nightly's issue job, run as the runner runs it, against a stand-in for GitHub's issues.

The job comments a confirmed regression on the open issue titled
``[perfci-nightly DEVICE/SUITE] …``, or opens one, and closes it on a clean
night whose ``fixed`` cases were green (tests/test_issue_triage_job.py). Anyone who can open issues
can open one under that title first; the job must find only the issues its own
token filed (the github-actions app), in perfci's nightly and in the one
``perfci init`` writes. The stand-in ``gh`` answers ``issue list`` as GitHub's
search does: filtered by ``--author`` when given, newest first, cut at
``--limit``.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.project.init import InitOptions, template, workflow_text

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
STEP = "open or update one issue per device and suite"
BOT = "app/github-actions"  # how gh names the author of an issue a GITHUB_TOKEN created
TITLE = "[perfci-nightly h200/decode] decode regressed on h200"

FAKE_GH = """\
#!{python}
import json, os, sys
args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
issues = json.loads(open(os.environ["FAKE_ISSUES"]).read())
with open(os.environ["FAKE_LOG"], "a") as log:
    if args[:2] == ["issue", "list"]:
        words = [w for w in opt("--search", "").split() if w != "in:title"]
        author = opt("--author")
        found = [i for i in issues if opt("--state", "open") == "open"
                 and all(w in i["title"] for w in words) and author in (None, i["author"]["login"])]
        fields = opt("--json").split(",")
        print(json.dumps([{{k: i[k] for k in fields}} for i in found[:int(opt("--limit", "30"))]]))
    elif args[:2] == ["issue", "comment"]:
        log.write(f"comment {{args[2]}}\\n")
        with open(os.environ["FAKE_LOG"] + f".{{args[2]}}.md", "w") as body:
            body.write(open(opt("--body-file")).read())
    elif args[:2] == ["issue", "close"]:
        log.write(f"close {{args[2]}} {{opt('--reason', '')}}\\n")
    elif args[:2] == ["issue", "create"]:
        log.write(f"create {{opt('--title')}}\\n")
        print("https://github.example/o/r/issues/999")
    else:
        sys.exit(f"fake gh: unexpected {{args}}")
"""


def _issue(number: int, login: str, title: str = TITLE) -> dict:
    return {"number": number, "title": title, "author": {"login": login, "is_bot": login.startswith("app/")}}


def _nightly_text() -> str:
    return (ROOT / ".github" / "workflows" / "nightly-gpu.yml").read_text(encoding="utf-8")


def _init_text() -> str:
    return workflow_text(template("nightly.yml"), InitOptions(devices=(("h200", "h200"),)))


WORKFLOWS = {"nightly-gpu.yml": _nightly_text, "perfci init's nightly": _init_text}


def _step(text: str) -> dict:
    doc = yaml.safe_load(text)
    return next(s for s in doc["jobs"]["issue"]["steps"] if s.get("name") == STEP)


@pytest.fixture
def issue_job(tmp_path):
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed (GitHub's runners have it)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable))
    gh.chmod(0o755)

    def run(text: str, issues: list[dict], outputs: dict | None = None) -> list[str]:
        step = _step(text)
        literal = {k: str(v) for k, v in (step.get("env") or {}).items() if "${{" not in str(v)}
        (tmp_path / "issues.json").write_text(json.dumps(issues))
        log, summary = tmp_path / "gh.log", tmp_path / "summary.md"
        log.write_text("")
        script = tmp_path / "step.sh"
        script.write_text(step["run"])
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **literal,
               "GH_TOKEN": "x", "GH_REPO": "o/r",
               "CONFIRMED": json.dumps({"confirmed_h200": "decode"} if outputs is None else outputs),
               "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "1",
               "GITHUB_STEP_SUMMARY": str(summary), "FAKE_ISSUES": str(tmp_path / "issues.json"),
               "FAKE_LOG": str(log)}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return log.read_text().splitlines()
    return run


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_the_bots_own_issue_gets_the_comment_not_a_decoy_with_its_title(issue_job, workflow):
    text = WORKFLOWS[workflow]()
    assert issue_job(text, [_issue(8, "mallory"), _issue(7, BOT)]) == ["comment 7"]


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_two_hundred_decoys_do_not_push_the_bots_issue_out_of_sight(issue_job, workflow):
    text = WORKFLOWS[workflow]()
    decoys = [_issue(1000 + i, "mallory") for i in range(200)]
    assert issue_job(text, [*decoys, _issue(7, BOT)]) == ["comment 7"]


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_a_decoy_alone_is_not_the_bots_issue_so_one_is_opened(issue_job, workflow):
    text = WORKFLOWS[workflow]()
    assert issue_job(text, [_issue(8, "mallory")]) == [f"create {TITLE}"]
    # And a bot issue of another device/suite is not this one either.
    assert issue_job(text, [_issue(9, BOT, TITLE.replace("h200", "gfx942"))]) == [f"create {TITLE}"]


def test_the_checks_catch_the_unfiltered_search(issue_job):
    """The search as it was (no --author, any author's title match) comments on the decoy."""
    text = _nightly_text()
    unfiltered = (text.replace('--author "$BOT" ', "")
                  .replace(" and .author.login == $bot", ""))
    assert unfiltered != text
    assert issue_job(unfiltered, [_issue(8, "mallory"), _issue(7, BOT)]) == ["comment 8"]
    # The client-side check alone still loses the bot's issue behind 200 decoys: a new one is opened.
    client_only = text.replace('--author "$BOT" ', "")
    decoys = [_issue(1000 + i, "mallory") for i in range(200)]
    assert issue_job(client_only, [*decoys, _issue(7, BOT)]) == [f"create {TITLE}"]
