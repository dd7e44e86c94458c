"""Test helper: turn a non-recursive GBNF grammar into an equivalent Python regex.

Only the GBNF subset our envelope grammar uses: literals with ``\\"``/``\\\\``/
``\\n`` escapes, character classes (same syntax as Python's), rule references,
grouping, ``|``, ``?``, ``*``, ``+`` and ``{m,n}``. Recursion raises ``ValueError``.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r'\s*(?:(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])|(?P<name>[A-Za-z][A-Za-z0-9_-]*)'
    r"|(?P<rep>\{\d+(?:,\d*)?\})|(?P<op>[()|?*+]))"
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/"}


def _literal(text: str) -> str:
    body, out, i = text[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return re.escape("".join(out))


def gbnf_to_regex(grammar: str, start: str = "root") -> str:
    rules: dict[str, str] = {}
    for line in grammar.strip().splitlines():
        name, _, body = line.partition("::=")
        rules[name.strip()] = body.strip()

    def convert(name: str, stack: tuple[str, ...]) -> str:
        if name in stack:
            raise ValueError(f"recursive rule {name}")
        body, pos, out = rules[name], 0, []
        while pos < len(body):
            m = _TOKEN.match(body, pos)
            if m is None or m.end() == pos:
                if body[pos:].strip() == "":
                    break
                raise ValueError(f"cannot read {body[pos:]!r}")
            pos = m.end()
            if m["lit"]:
                out.append(_literal(m["lit"]))
            elif m["cls"]:
                out.append(m["cls"])
            elif m["name"]:
                out.append(f"(?:{convert(m['name'], (*stack, name))})")
            elif m["rep"]:
                out.append(m["rep"])
            elif m["op"] == "(":
                out.append("(?:")
            else:
                out.append(m["op"])
        return "".join(out)

    return convert(start, ())
