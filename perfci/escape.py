"""Text from runs, kernels, errors and commits, made safe for where perfci writes it.

Case names, suite names, error messages, commit subjects and the fields of a
results file are whatever their authors wrote. perfci posts some of it to
GitHub (issue.md, summary.md, PR comments), writes some into CSV that people
open in a spreadsheet, and prints some in a terminal. Each writer passes that
text through one function here, at the place it is written:

- :func:`md_text`: markdown prose and table cells. Nothing a name holds
  becomes a link, an image, an autolink, HTML, a mention, an issue reference,
  emphasis, a heading, a list, a new line or a new table cell. A writer puts
  no "(" right after it (a "]" it ends with would open a link there).
- :func:`md_code`: an inline code span no backtick in the name can close.
- :func:`md_block`: a fenced code block no line of the text can close.
- :func:`html_text`: text inside raw HTML in markdown (``<summary>``).
- :func:`csv_cell`: a CSV cell a spreadsheet will not read as a formula (OWASP).
- :func:`term_text`: a terminal line with no control character or escape
  sequence of its own (it could clear the screen, retitle the window, hide text).
- :func:`yaml_scalar`: a YAML scalar that reads back as the same string.

Ordinary names and messages (letters, digits, ``_ . - [ ] = x ( ) % : , +``)
come out as they went in, so the reports of a normal night are the same bytes.
"""
from __future__ import annotations

import html
import json
import re

# Put after "@" and "#" (and inside "://" and "www.") so GitHub sees no mention, issue
# reference or bare URL, while a reader sees the text unchanged: an invisible character.
ZWJ = "\u200d"

# C0 and C1 controls and DEL, and the bidirectional overrides that reorder what a terminal
# or a browser shows ("Trojan source"): never written as they are.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")

# GitHub links "@name" and "@org/team" (a mention, and a notification), "#12" and "GH-12"
# (an issue reference, and a cross-link in that issue), an e-mail address, "https://..."
# and "www.example.com" (the autolink extension): each is broken by an invisible character.
_LIVE_WORDS = re.compile(r"(?<=@)(?=[A-Za-z0-9])|(?<=#)(?=[0-9])|(?<=GH-)(?=[0-9])|(?<=:)(?=//)"
                         r"|(?i:(?<=www)(?=\.))", re.ASCII)

# Backslash-escaped wherever they stand: code spans and fences (`), emphasis (*, ~),
# table cells (|), math ($), and the backslash itself, so the text cannot escape an escape of ours.
_ALWAYS = re.compile(r"[\\`*~|$]")
# Escaped where they would start something: "<" before a tag, comment or autolink;
# "&" before an entity (&#64; is an "@"); "_" at a word's edge (inside a word it is no emphasis);
# "(" after "]", which makes "[text](url)" and "![alt](src)" a link and an image.
_WHERE = re.compile(r"<(?=[A-Za-z/!?])|&(?=[A-Za-z#])|(?<![^\W_])_|_(?![^\W_])|(?<=\])\(")
# At the start of a block, what opens one: heading, quote, list item (a marker and a space),
# thematic break, and "[": a link reference or footnote definition ("[x]: url"), a task box.
# Without a definition, "[x]" and "[x][y]" are no link; text put through md_text can start a
# block only at its start (its new lines are spaces), so no definition can come from it.
_BLOCK_START = re.compile(r"^(?:#|>|\[|[-+](?= )|-(?=(?: *-){2,} *$)|\d{1,9}(?=[.)](?: |$)))")


def _one_line(text: object) -> str:
    """Every run of whitespace and control characters as one space, so the text stays in its line and cell."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())


def md_text(text: object) -> str:
    """``text`` as markdown prose or a table cell: shown as written, nothing in it live."""
    s = _one_line(text)
    s = _ALWAYS.sub(lambda m: "\\" + m.group(), s)
    s = _WHERE.sub(lambda m: "\\" + m.group(), s)
    s = _LIVE_WORDS.sub(ZWJ, s)
    m = _BLOCK_START.match(s)
    if m:  # "1. x" stays text as "1\. x"; "# x", "> x", "- x" as "\# x", "\> x", "\- x"
        s = s[:m.end()] + "\\" + s[m.end():] if m.group().isdigit() else "\\" + s
    return s


def md_code(text: object, *, table: bool = False) -> str:
    """``text`` as an inline code span: fenced by more backticks than any run in it.

    ``table``: the span is in a table cell, where GitHub splits cells at a bare ``|`` even
    inside code, and shows ``\\|`` there as ``|``.
    """
    s = _one_line(text)
    if table:
        s = s.replace("|", "\\|")
    runs = re.findall(r"`+", s)
    fence = "`" * (max(map(len, runs), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""  # a space each side, which markdown takes off
    return f"{fence}{pad}{s}{pad}{fence}"


def md_block(text: object, info: str = "") -> str:
    """``text`` as a fenced code block (lines kept): the fence is longer than any backtick run in it."""
    s = re.sub(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]", "", str(text).replace("\r\n", "\n")).strip("\n")
    runs = re.findall(r"`+", s)
    fence = "`" * max(3, max(map(len, runs), default=0) + 1)
    return f"{fence}{info}\n{s}\n{fence}"


def html_text(text: object) -> str:
    """``text`` inside raw HTML of a markdown document (``<summary>``), where markdown is not read
    but GitHub still finds mentions, issue references and bare URLs."""
    return _LIVE_WORDS.sub(ZWJ, html.escape(_one_line(text), quote=False))


# OWASP, CSV injection: a cell that starts with one of these is a formula to a spreadsheet.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """``value`` for a CSV cell: a string a spreadsheet would run as a formula gets a leading ``'``.

    Numbers pass as they are (a negative number is data, not a formula); the csv module quotes.
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def term_text(text: object) -> str:
    """``text`` for a terminal: every control character (ESC of an ANSI or OSC sequence, a
    carriage return, a bell, a newline, a bidirectional override) written as ``\\xNN`` / ``\\uNNNN``."""
    return _CONTROL.sub(lambda m: _visible(m.group()), str(text))


# A YAML plain scalar that reads back as this very string: a name that starts with a letter
# or "_", of letters, digits, "_ . -", and none of YAML 1.1's booleans and nulls.
_PLAIN_YAML = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "true", "false", "on", "off", "null", "nan", "inf"}


def yaml_scalar(text: object) -> str:
    """``text`` as a YAML scalar: plain when that reads back the same, else JSON's double-quoted
    string (valid YAML), which no newline, colon or quote in it can leave."""
    s = str(text)
    if _PLAIN_YAML.fullmatch(s) and s.lower() not in _YAML_WORDS:
        return s
    return json.dumps(s)

