"""Text from outside lazylab printed as data, never as terminal commands (issue 51).

A string read from a file, a memo record, a plugin or a path may hold control characters: an escape
sequence (``ESC [ 2 J`` clears the screen, ``CSI`` = ``\\x9b`` starts one on 8-bit terminals), a
newline that forges a second line, or a Unicode bidirectional override that shows text in another
order than it is stored (Boucher & Anderson 2021, "Trojan Source", CVE-2021-42574). ``printable``
writes each of them visibly as its Python escape; every line lazylab prints that holds such a string
passes through it (tables, notes, warnings, errors), and the schemas refuse them in the fields of
the files lazylab writes (``lazylab.schemas.caches.Text``).
"""

from __future__ import annotations

import re

# C0 controls (tab and newline included: a field is one line), DEL, C1 controls, and the bidirectional
# formatting characters: ALM, LRM, RLM, LRE/RLE/PDF/LRO/RLO, LRI/RLI/FSI/PDI (Unicode UAX #9). As a regex
# character class body, valid for Python's re and for pydantic's (Rust) regex alike.
CONTROLS = "\\x00-\\x1f\\x7f-\\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[{CONTROLS}]")


def printable(text, keep_newlines: bool = False) -> str:
    """``str(text)`` with every control character of ``CONTROLS`` written as its Python escape.

    An escape character becomes the four characters backslash, ``x``, ``1``, ``b``; U+202E becomes
    backslash, ``u202e``; a newline backslash, ``n`` (unless ``keep_newlines``: a message of several lines
    lazylab itself composed keeps its line breaks, each line escaped). Every other character is kept,
    printable Unicode included. Never raises.
    """
    text = text if isinstance(text, str) else str(text)
    if keep_newlines:
        return "\n".join(printable(line) for line in text.split("\n"))
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
