"""Redaction cost (issues 17, 18): the redactor against the matching engine it replaced,
in the same run and on the same texts.

    python bench/redaction.py [--runs 7] [--json]
    python bench/redaction.py --check 3000   # differential: redactor vs reference on
                                             # N seeded random texts; exit 1 on a mismatch

``reference`` below is the engine before issue 18, kept here only: the same patterns
in the same order, but ~240 ``keyword in text`` tests to pick the vendored rules,
every pass run over the whole text (template rules over their keyword lines) and
~1,500 ``stopword in secret`` tests per generic finding. The redactor must give the same output; each row
says whether it did (``same``).

Texts (each class at hot-path size, ~160 chars like a status line or digest, and at
~1 KB): ``clean`` holds no vendored-rule keyword and no secret shape; ``keywords``
holds secret-flavoured words (token, password, api key, auth …) but no secret;
``secrets`` holds the synthetic secrets of ``tests/data/secrets/corpus.json``. Then
the older rows: a one-line digest, a 1,200-char bank entry, an 8,000-char trace
string and a 53 KB source file (this repository's memory package).

Figures: median CPU µs per KB of text (``time.process_time``, so the other processes
of a shared machine count less) for the redactor and the reference, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.memory import redact, secret_rules, secret_shapes  # noqa: E402
from clio_acp.memory.secret_rules import load_ruleset  # noqa: E402

CLEAN_LINES = (
    "collected 48 items",
    "src/parser/lexer.py:118: error: Incompatible return value (got int, expected str)",
    "FAILED tests/unit/test_lexer.py::test_round_trip - AssertionError: 3 != 4",
    "Ran 12 commands, 3 files changed; build took 1.4 min on 2 cores",
    "warning: unused variable `width` in fn render_row at src/table.rs:77:9",
    "make[2]: Leaving directory '/home/dev/project/build/src'",
    "exit code 2: grep found no match in docs/ for the pattern 'frobnicate'",
)
KEYWORD_LINES = (
    "the api key was missing from the environment, token refresh failed at line 42",
    "password: str = field(default='', repr=False)  # filled in by the login form",
    "def get_secret(name: str) -> str: return vault.read(name)",
    "auth header missing; access denied for user alice (credentials expired)",
    "AWS_SECRET_ACCESS_KEY is not set; export it or use a profile",
    "TOKEN_TTL = 3600  # seconds an access token lives",
)


def _fill(lines: tuple[str, ...], size: int) -> str:
    text = ""
    while len(text) < size:
        text += lines[len(text) % len(lines)] + "\n"
    return text[:size]


def _secrets(size: int) -> str:
    rows = json.loads((ROOT / "tests/data/secrets/corpus.json").read_text("utf-8"))["formats"]
    return "\n".join(row["text"] for row in rows)[:size]


def inputs() -> dict[str, str]:
    """Named texts; the clean and keyword texts are checked to be what they claim."""
    sources = "".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "clio_acp/memory").glob("*.py"))
    )
    entry = (
        "The API client reads API_KEY=super-secret-value-123 from .env; run pytest -x "
        "tests/test_auth.py after editing src/auth/token.py. "
    ) * 20
    texts = {
        "clean 160": _fill(CLEAN_LINES, 160),
        "clean 1 KB": _fill(CLEAN_LINES, 1024),
        "keywords 160": _fill(KEYWORD_LINES, 160),
        "keywords 1 KB": _fill(KEYWORD_LINES, 1024),
        "secrets 160": _secrets(160),
        "secrets 1 KB": _secrets(1024),
        "digest": "pytest failed: AssertionError in test_token_refresh at line 42, "
        "the api key was missing",
        "bank entry": entry[:1200],
        "trace string": (entry * 7)[:8000],
        "53 KB source": sources[:53_000],
    }
    ruleset = load_ruleset()
    for name in ("clean 160", "clean 1 KB"):
        assert not ruleset.candidates(texts[name].lower()), name
    for name in ("clean 160", "clean 1 KB", "keywords 160", "keywords 1 KB"):
        assert redact.redact_secrets_text(texts[name]) == texts[name], name
    return texts


def reference(text: str) -> tuple[str, int]:
    """The engine before issue 18 (same patterns and order): (text, replacements)."""
    count = 0
    out = text
    for kind, pattern in redact._SPEC_SHAPES:
        out, n = pattern.subn(f"[redacted:{kind}]", out)
        count += n
    ruleset = load_ruleset()
    lowered = text.lower()
    candidates = [r for r in ruleset.rules if any(k in lowered for k in r.keywords)]
    specific = [rule for rule in candidates if not rule.rule_id.startswith("generic")]
    out, n = _reference_vendored(specific, out)
    count += n
    out, n = redact._ASSIGNMENT.subn(redact._assignment_value, out)
    count += n
    out, n = _reference_quoted(out)
    count += n
    lowered = out.lower()
    for shape in secret_shapes.EXTRA_SHAPES:
        if any(needle in lowered for needle in shape.needles):
            spans = redact._secret_spans(shape.pattern, out)
            out, n = redact._replace_spans(out, spans, shape.kind)
            count += n
    generic = [rule for rule in candidates if rule.rule_id.startswith("generic")]
    out, n = _reference_vendored(generic, out)
    count += n
    out, n = redact._replace_spans(out, secret_shapes._scan_tokens(out), secret_shapes.TOKEN_KIND)
    count += n
    out, n = redact._RESIDUE.subn(r"\1", out)
    return out, count + n


def _reference_vendored(rules: list, text: str) -> tuple[str, int]:
    count = 0
    for rule in rules:
        if rule.pattern is not None:
            spans = list(_reference_spans(rule, text))
            text, n = redact._replace_spans(text, spans, rule.rule_id)
            count += n
    return text, count


def _reference_spans(rule, text: str):
    """``Ruleset.secret_spans`` before issue 18: template rules scanned over their
    keyword lines, stopwords tested one by one."""
    if rule.is_template:
        windows = secret_rules._keyword_windows(text, rule.keywords)
        matches = [m for s, e in windows for m in rule.pattern.finditer(text, s, e)]
    else:
        matches = list(rule.pattern.finditer(text))
    lists = (*rule.allowlists, load_ruleset().global_allowlist)
    for match in matches:
        span = rule.secret_span(match)
        if span is None:
            continue
        secret = text[span[0] : span[1]]
        if rule.entropy and secret_rules.shannon_entropy(secret) <= rule.entropy:
            continue
        generic = rule.rule_id.startswith("generic")
        if rule.entropy and generic and not any(c.isdigit() for c in secret):
            continue
        start = secret_rules._name_start(text, match.start()) if rule.is_template else match.start()
        line = secret_rules._line_around(text, start, match.end())
        if any(_reference_allows(a, secret, text[start : match.end()], line) for a in lists):
            continue
        yield span


def _reference_allows(allowlist, secret: str, match: str, line: str) -> bool:
    checks = [False] if allowlist.has_paths else []
    if allowlist.regex_sources:
        subject = {"match": match, "line": line}.get(allowlist.target, secret)
        checks.append(any(regex.search(subject) for regex in allowlist.regexes))
    if allowlist.stopwords:
        lowered = secret.lower()
        checks.append(any(word in lowered for word in allowlist.stopwords))
    if not checks:
        return False
    return all(checks) if allowlist.require_all else any(checks)


def _reference_quoted(text: str) -> tuple[str, int]:
    count = 0

    def _replace(match):
        nonlocal count
        value = redact._quoted_value(match)
        count += value is not None
        return match.group(0) if value is None else value

    return secret_shapes.QUOTED_ASSIGNMENT.sub(_replace, text), count


def redactor(text: str) -> tuple[str, int]:
    tally = redact.RedactionTally()
    return redact.redact_secrets_text(text, tally), tally.count


_PIECES = (
    "=", ":", " = ", "::", "=>", '"', "'", "\n", " ", "-", "_", ".", "/", "(", ")", "{",
    "[redacted:jwt]", "\ue000\ue100", "\u0130", "\u017f", "\u212a", "\u0131", "…", "$", "&",
    "?", ";", ",", "`", "://", "@", "password", "token", "secret", "api_key", "apikey",
    "Authorization", "Bearer", "Basic", "login", "AccountKey", "Pwd", "MYSQL_PWD", "sig",
)  # fmt: skip


def random_text(rng: random.Random, words: list[str], secrets: list[str]) -> str:
    """Rule words, secret-flavoured names, separators, token-like runs, corpus secrets
    and odd characters glued together, in random case."""
    out = []
    for _ in range(rng.randint(1, 40)):
        roll = rng.random()
        if roll < 0.25:
            piece = rng.choice(words)
        elif roll < 0.6:
            piece = rng.choice(_PIECES)
        elif roll < 0.8:
            piece = "".join(
                rng.choice("abcdefABCDEF0123456789xyzXYZ_-+/=.") for _ in range(rng.randint(4, 60))
            )
        elif roll < 0.9:
            piece = rng.choice(secrets)
        else:
            piece = "".join(chr(rng.randint(32, 0x2200)) for _ in range(rng.randint(1, 5)))
        case = rng.random()
        out.append(piece.upper() if case < 0.2 else piece.title() if case < 0.3 else piece)
    return "".join(out)


def check(count: int) -> int:
    """Redactor vs reference on ``count`` random texts (seed 18): mismatches found."""
    rng = random.Random(18)
    rules = load_ruleset().rules
    words = sorted({w for r in rules for w in (*r.keywords, *(r.start_words or ()))})
    secrets = [
        row["text"]
        for row in json.loads((ROOT / "tests/data/secrets/corpus.json").read_text("utf-8"))[
            "formats"
        ]
    ]
    mismatches = 0
    for _ in range(count):
        text = random_text(rng, words, secrets)
        if redactor(text) != reference(text):
            mismatches += 1
            print(f"mismatch: {text!r}", file=sys.stderr)
    print(f"{count} random texts, {mismatches} mismatches")
    return mismatches


def _median_us_per_kb(fn: Callable[[str], object], text: str, runs: int) -> float:
    fn(text)  # warm: lazy compiles
    reps = max(1, int(40_000 / max(len(text), 100)))
    samples = []
    for _ in range(runs):
        started = time.process_time()
        for _ in range(reps):
            fn(text)
        samples.append((time.process_time() - started) / reps * 1e6)
    return statistics.median(samples) / max(len(text), 1) * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", type=int, default=0, metavar="N")
    args = parser.parse_args()
    if args.check:
        return 1 if check(args.check) else 0
    rows = {}
    for name, text in inputs().items():
        fast = _median_us_per_kb(redactor, text, args.runs)
        slow = _median_us_per_kb(reference, text, args.runs)
        rows[name] = {
            "chars": len(text),
            "usPerKB": round(fast, 1),
            "referenceUsPerKB": round(slow, 1),
            "speedup": round(slow / fast, 1),
            "same": redactor(text) == reference(text),
        }
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"loadAverage1m": round(load, 2), "rows": rows}))
        return 0
    print(f"median of {args.runs} runs, CPU µs per KB; load average {load:.2f}")
    print(f"{'text':14} {'chars':>6} {'redactor':>9} {'reference':>10} {'speedup':>8}  same")
    for name, row in rows.items():
        print(
            f"{name:14} {row['chars']:>6} {row['usPerKB']:>9} {row['referenceUsPerKB']:>10}"
            f" {row['speedup']:>7}x  {row['same']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
