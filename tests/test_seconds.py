"""Every option that takes seconds refuses nan, inf, -1 and 0 with one line, the same in every command."""
from __future__ import annotations

import pytest

from perfci.cli import main

COMMANDS = {
    "run --timeout": ["run", "smoke", "--timeout"],
    "confirm --budget": ["confirm", "HEAD", "--budget"],
    "confirm --timeout": ["confirm", "HEAD", "--timeout"],
    "confirm --build-timeout": ["confirm", "HEAD", "--build-timeout"],
    "bisect --budget": ["bisect", "a", "b", "--budget"],
    "bisect --total-budget": ["bisect", "a", "b", "--total-budget"],
    "bisect --timeout": ["bisect", "a", "b", "--timeout"],
    "nightly --budget": ["nightly", "smoke", "--out", "o", "--budget"],
    "nightly --bench-timeout": ["nightly", "smoke", "--out", "o", "--bench-timeout"],
}


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
@pytest.mark.parametrize("where", list(COMMANDS))
def test_seconds_are_finite_and_positive_with_one_message_everywhere(where, value, capsys):
    try:
        code = main([*COMMANDS[where], value])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    option = COMMANDS[where][-1]
    assert f"argument {option}: {value} must be a positive number of seconds" in capsys.readouterr().err


def test_a_good_number_of_seconds_is_taken():
    from perfci.args import seconds

    assert seconds("150") == 150.0 and seconds("0.5") == 0.5
