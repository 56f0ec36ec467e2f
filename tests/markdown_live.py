"""What in a markdown document GitHub would make live: read with a real markdown parser (markdown-it-py).

:func:`live` parses the document as CommonMark with GitHub's tables and
strikethrough and lists what a reader or the bot's audience would meet as more
than text: a link, an image, an autolink, raw HTML other than the few tags
perfci's templates write, and in the text outside code (where GitHub's filters
look, after markdown) a mention, an issue reference, a bare URL or an e-mail
address, which GitHub links too. :func:`shown` is the document's text as a
reader sees it (code included, invisible characters left out), to check that a
name is shown whole.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

CORPUS = Path(__file__).resolve().parent / "data" / "escape" / "hostile_names.json"

# The tags perfci's own templates write (a fold, a code name in it, small print).
OWN_TAGS = {"details", "summary", "code", "sub"}
# GitHub's mention filter: "@" after the start or a character that is not a word character,
# then a name; the issue filter: "#" and digits; the autolink extension: a scheme's "://",
# "www." and an e-mail address.
MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")
ISSUE = re.compile(r"(?<![A-Za-z0-9_])#[0-9]|\bGH-[0-9]")
BARE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|\bwww\.", re.IGNORECASE)
EMAIL = re.compile(r"[A-Za-z0-9._+-]@[A-Za-z0-9-]+\.[A-Za-z]")
INVISIBLE = "\u200b\u200c\u200d"

_MD = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


def hostile_names() -> list[str]:
    """The corpus: names and messages written to break out of where perfci puts them."""
    return json.loads(CORPUS.read_text())["names"]


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.data: list[str] = []
        self._code = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag if not attrs else f"{tag} with attributes")
        self._code += tag == "code"

    def handle_endtag(self, tag):
        self._code -= tag == "code" and self._code > 0

    def handle_data(self, data):
        if not self._code:
            self.data.append(data)


def _text_problems(text: str, where: str) -> list[str]:
    found = []
    for name, pattern in (("mention", MENTION), ("issue reference", ISSUE), ("bare URL", BARE_URL),
                          ("e-mail autolink", EMAIL)):
        for m in pattern.finditer(text):
            found.append(f"{name} {text[max(0, m.start() - 10):m.end() + 10]!r} in {where}")
    return found


def _html_problems(html: str) -> list[str]:
    parser = _Html()
    parser.feed(html)
    found = [f"HTML tag <{t}>" for t in parser.tags if t not in OWN_TAGS]
    return found + _text_problems("".join(parser.data), "HTML")


def live(document: str, own_links: tuple[str, ...] = ()) -> list[str]:
    """Everything in ``document`` that would render as more than text (but links to ``own_links``)."""
    found: list[str] = []
    for token in _MD.parse(document):
        if token.type == "html_block":
            found += _html_problems(token.content)
        for child in token.children or ():
            if child.type in ("link_open", "image"):
                kind = "autolink" if child.markup == "autolink" else child.type
                target = child.attrGet("href") or child.attrGet("src")
                if not (kind == "link_open" and target in own_links):
                    found.append(f"{kind} to {target!r}")
            elif child.type == "html_inline":
                found += _html_problems(child.content)
            elif child.type == "text":
                found += _text_problems(child.content, "text")
    return found


def shown(document: str) -> str:
    """The text a reader sees: every inline's text and code, whitespace as one space, no invisible character."""
    parts = []
    for token in _MD.parse(document):
        for child in token.children or ():
            if child.type in ("text", "code_inline"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            elif child.type == "html_inline":
                parts.append(child.content)
        if token.type in ("fence", "code_block", "html_block"):
            parts.append(token.content)
        parts.append(" ")
    text = "".join(parts)
    for ch in INVISIBLE:
        text = text.replace(ch, "")
    return " ".join(text.split())


def one_line(name: str) -> str:
    """A name as perfci shows it on one line: its whitespace, control characters and bidirectional
    overrides as one space."""
    return " ".join(re.sub("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", " ", name).split())


def headings(document: str) -> list[str]:
    """The text of every heading, in order (a name that made one, or hid one in a block, shows here)."""
    tokens = _MD.parse(document)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
