"""JSON text as kombu's json wrote it, made safe for a jsonb column without changing what a worker reads."""
import json
import re
from decimal import Decimal

from stagedrain.errors import NotStageable

# A JSON string (skipped, or checked when it holds \u escapes), a number with
# an exponent, or a token jsonb refuses. Outside strings nothing else needs care.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?[eE][-+]?\d+)|(NaN|-?Infinity)')


def _check_string(token, what):
    """jsonb stores text as UTF-8 without NUL: a \\u0000 or a lone surrogate would fail the INSERT."""
    if "\\u" not in token:
        return
    s = json.loads(token)
    if "\x00" in s:
        raise NotStageable(
            "%s: a string holds the NUL character (\\x00), which Postgres' jsonb cannot store: %r" % (what, s[:80])
        )
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise NotStageable("%s: a string holds a lone surrogate, which is not UTF-8: %r" % (what, s[:80])) from None


def _plain_float(token):
    """Python's float 1e+16 in fixed notation with a fraction.

    jsonb's numeric prints 1e+16 as 10000000000000000, which json.loads reads
    as an int; 10000000000000000.0 keeps its scale and comes back a float.
    """
    s = format(Decimal(token), "f")
    return s if "." in s else s + ".0"


def for_jsonb(text, what):
    """text (JSON) ready for ::jsonb, or NotStageable naming what (e.g. "task arguments")."""

    def fix(m):
        if m.group(2):
            raise NotStageable("%s: %s cannot be stored in Postgres' jsonb (JSON has no such number)" % (what, m.group(2)))
        if m.group(1):
            return _plain_float(m.group(1))
        _check_string(m.group(0), what)
        return m.group(0)

    return _TOKEN.sub(fix, text)
