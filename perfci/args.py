"""Argument types the commands share, so a bad value reads the same everywhere."""
from __future__ import annotations

import argparse
import math


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None


def percentage(text: str) -> float:
    """A finite percentage >= 0 (``--min-effect 3``)."""
    value = _number(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite percentage >= 0")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds > 0 (``--build-timeout 600``)."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def probability(text: str) -> float:
    """Strictly between 0 and 1 (``--alpha 0.05``)."""
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be between 0 and 1")
    return value


def at_least(minimum: int, why: str):
    """An argument type for a whole number >= ``minimum``; ``why`` ends the refusal."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text}: {why}")
        return value

    return parse
