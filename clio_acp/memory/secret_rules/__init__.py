"""The vendored secret-scanner ruleset (gitleaks' default config) as Python patterns.

Owns loading ``gitleaks.toml`` (MIT, see ``LICENSE`` and ``README.md`` beside this
file for the version and the update procedure) with stdlib ``tomllib``, translating
its Go RE2 patterns to ``re`` (scoped inline flags, ``\\z``, POSIX classes), the
keyword prefilter gitleaks uses, the Shannon-entropy floor and the per-rule and
global allowlists. Rules that only make sense for a file path (``path = …``) are
left out: redaction sees text, never a path. Patterns compile lazily, on the first
text that holds one of the rule's keywords, so importing this costs no compile.

Typical use::

    ruleset = load_ruleset()
    for rule in ruleset.candidates(text.lower()):
        for start, end in ruleset.secret_spans(rule, text):
            ...
"""

from __future__ import annotations

import logging
import math
import re
import tomllib
import warnings
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from clio_acp.memory.secret_rules.anchors import (
    anchored_finditer,
    case_fold,
    pattern_start_words,
    word_offsets_up_to,
)

__all__ = [
    "RULES_FILE",
    "SCAN_WORD",
    "Allowlist",
    "KeywordScan",
    "Ruleset",
    "SecretRule",
    "go_regex_to_python",
    "load_ruleset",
]

log = logging.getLogger(__name__)

RULES_FILE = Path(__file__).with_name("gitleaks.toml")

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "xdigit": "0-9a-fA-F",
    "upper": "A-Z",
    "lower": "a-z",
    "space": r"\s",
    "word": r"\w",
    "punct": r"!-/:-@\[-`{-~",
}
_GITLEAKS_TERMINATOR = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
_OPTIONAL_TERMINATOR = r"""(?:[\x60'"\s;]|\\[nr]|$)?"""
_INLINE_FLAGS = re.compile(r"\(\?([imsU]+)\)")


def go_regex_to_python(pattern: str) -> str:
    """Translate a Go RE2 pattern to Python ``re`` syntax.

    RE2 lets ``(?i)`` appear mid-pattern, applying to the rest of the enclosing
    group (every later alternative included); Python only accepts it at the start,
    so each such flag becomes a scoped ``(?i:…)`` per alternative. ``\\z`` becomes
    ``\\Z`` and ``[[:alnum:]]``-style classes are spelled out. Raises nothing; a
    pattern Python still refuses fails at compile time.
    """
    pattern = pattern.replace(r"\z", r"\Z")
    for name, spelled in _POSIX_CLASSES.items():
        pattern = pattern.replace(f"[:{name}:]", spelled)
    lead = _INLINE_FLAGS.match(pattern)
    head = lead.group(0) if lead else ""
    return head + _scope_inline_flags(pattern[len(head) :])


def _scope_inline_flags(pattern: str) -> str:
    out: list[str] = []
    # One entry per open group: the flags opened inside it that still need closing.
    open_flags: list[list[str]] = [[]]
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]" or pattern[i + 1 : i + 3] == "^]":
                out.append(pattern[i : i + 2 + (pattern[i + 1] == "^")])
                i += 2 + (pattern[i + 1] == "^")
                continue
        elif flag := _INLINE_FLAGS.match(pattern, i):
            out.append(f"(?{flag.group(1).replace('U', '')}:")
            open_flags[-1].append(flag.group(1))
            i = flag.end()
            continue
        elif ch == "(":
            open_flags.append([])
        elif ch == "|":
            out.append(")" * len(open_flags[-1]) + "|")
            out.extend(f"(?{f.replace('U', '')}:" for f in open_flags[-1])
            i += 1
            continue
        elif ch == ")" and len(open_flags) > 1:
            out.append(")" * len(open_flags.pop()))
        out.append(ch)
        i += 1
    out.append(")" * len(open_flags[0]))
    return "".join(out)


def _compile(pattern: str) -> re.Pattern[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile(go_regex_to_python(pattern))


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text`` (gitleaks' entropy floor); 0.0 for ``""``."""
    if not text:
        return 0.0
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values())


@dataclass(frozen=True)
class Allowlist:
    """One gitleaks allowlist: a finding it matches is not a secret.

    ``target`` is what ``regexes`` test (``secret``, ``match`` or ``line``);
    ``stopwords`` are tested against the lowercased secret. A list that also names
    paths never matches with ``condition = "AND"`` and ignores them with ``OR``
    (redaction has no path).
    """

    regex_sources: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()
    target: str = "secret"
    require_all: bool = False
    has_paths: bool = False

    @cached_property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        """The allowlist's regexes, compiled once."""
        return tuple(_compile(source) for source in self.regex_sources)

    @cached_property
    def stopword_pattern(self) -> re.Pattern[str]:
        """Finds a stopword in a lowercased secret in one scan (the stopwords as a prefix
        tree): ``search`` succeeds exactly when ``any(word in lowered …)`` does, without
        ~1,500 substring tests per finding for ``generic-api-key``."""
        return re.compile(_prefix_tree_regex(self.stopwords))

    def allows(self, secret: str, match: str, line: str) -> bool:
        """True when this allowlist exempts ``secret`` (found as ``match`` on ``line``)
        from redaction (gitleaks semantics: any/all of its checks)."""
        checks: list[bool] = []
        if self.has_paths:
            checks.append(False)
        if self.regex_sources:
            subject = {"match": match, "line": line}.get(self.target, secret)
            checks.append(any(regex.search(subject) for regex in self.regexes))
        if self.stopwords:
            checks.append(self.stopword_pattern.search(secret.lower()) is not None)
        if not checks:
            return False
        return all(checks) if self.require_all else any(checks)


@dataclass(frozen=True)
class SecretRule:
    """One detection rule: ``rule_id`` becomes the ``[redacted:<rule_id>]`` kind."""

    rule_id: str
    source: str
    keywords: tuple[str, ...]
    entropy: float = 0.0
    secret_group: int = 0
    allowlists: tuple[Allowlist, ...] = ()

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        """The compiled pattern, or None (logged once) if Python refuses it.

        A service-specific rule's closing delimiter (quote, space, ``;`` or end) is
        made optional: gitleaks wants it to keep scan noise down, but redaction must
        not let ``hf_…`` through because a ``.`` or ``)`` follows it. Whatever
        token characters follow a fixed-length match join its marker afterwards.
        """
        source = self.source
        if not self.rule_id.startswith("generic"):
            source = source.replace(_GITLEAKS_TERMINATOR, _OPTIONAL_TERMINATOR)
        if self.is_template:
            # The leading name characters only move the match start left; scanning
            # them lazily at every offset is most of the cost. ``secret_spans``
            # restores the same start for the allowlists that look at the match.
            source = "(?i)(?:" + source[len(_KEYWORD_TEMPLATE_PREFIX) :]
        try:
            return _compile(source)
        except re.error as error:
            log.warning("secret rule %s left out: %s", self.rule_id, error)
            return None

    @cached_property
    def start_words_scanned(self) -> bool:
        """Every start word is a ``SCAN_WORD`` (a scan of the text's words finds them)."""
        return self.start_words is not None and all(
            SCAN_WORD.fullmatch(word) for word in self.start_words
        )

    @cached_property
    def literal_head(self) -> bool:
        """The pattern opens with a literal character (``re`` skips to it by itself)."""
        return _LITERAL_HEAD.match(self.source) is not None

    @property
    def is_template(self) -> bool:
        """gitleaks' "name with keyword, separator, value" template rule."""
        return self.source.startswith(_KEYWORD_TEMPLATE_PREFIX)

    @cached_property
    def start_words(self) -> tuple[str, ...] | None:
        """Lowercase words one of which starts every match of ``pattern`` (case-folded;
        ``anchors``): a template rule's keyword group (and any other top-level branch:
        ``…|\\b(ATATT3…``), another rule's literal head (``\\b(ghp_…`` → ``ghp_``);
        None where that reader does not follow the pattern."""
        if not self.is_template:
            return pattern_start_words(self.source)
        return pattern_start_words("(?i)(?:" + self.source[len(_KEYWORD_TEMPLATE_PREFIX) :])

    def secret_span(self, match: re.Match[str]) -> tuple[int, int] | None:
        """The span gitleaks reports as the secret: ``secretGroup``, else the first
        non-empty group, else the whole match."""
        if self.secret_group and self.secret_group <= (match.re.groups or 0):
            group = self.secret_group
            return match.span(group) if match.group(group) else None
        for group in range(1, (match.re.groups or 0) + 1):
            if match.group(group):
                return match.span(group)
        return match.span() if match.group() else None


@dataclass(frozen=True)
class Ruleset:
    """The usable rules, the global allowlist and what was left out (and why)."""

    rules: tuple[SecretRule, ...]
    global_allowlist: Allowlist
    skipped: dict[str, str] = field(default_factory=dict)

    @cached_property
    def _by_keyword(self) -> dict[str, tuple[int, ...]]:
        index: dict[str, list[int]] = {}
        for position, rule in enumerate(self.rules):
            for keyword in rule.keywords:
                index.setdefault(keyword, []).append(position)
        return {keyword: tuple(positions) for keyword, positions in index.items()}

    @cached_property
    def _keyword_scan(self) -> KeywordScan:
        return KeywordScan.build(tuple(self._by_keyword))

    def candidates(self, lowered: str) -> list[SecretRule]:
        """Rules with at least one keyword in ``lowered`` (the text, lowercased), in
        file order: gitleaks' prefilter, so most texts run no rule at all.

        The same rules as ``[r for r in rules if any(k in lowered for k in r.keywords)]``,
        found in one regex scan instead of one substring search per keyword (~240).
        """
        return self.candidates_of(self._keyword_scan.present(lowered))

    def candidates_of(self, present: Iterable[str]) -> list[SecretRule]:
        """The rules, in file order, with a keyword in ``present`` (the keywords found
        in a text; other words are ignored)."""
        by_keyword = self._by_keyword
        hits = {position for word in present for position in by_keyword.get(word, ())}
        return [self.rules[position] for position in sorted(hits)]

    @property
    def keywords(self) -> tuple[str, ...]:
        """Every rule keyword (lowercase), once each."""
        return tuple(self._by_keyword)

    def secret_spans(
        self, rule: SecretRule, text: str, folded_words: frozenset[str] | None = None
    ) -> Iterator[tuple[int, int]]:
        """Spans of ``text`` that ``rule`` reports as secrets after its entropy floor
        (and gitleaks' digit requirement for ``generic-*`` rules) and allowlists.
        ``folded_words``: the ``SCAN_WORD``s that occur in ``case_fold(text)``, at least
        the rule's start words that do (they then spare searching for the others)."""
        if rule.pattern is None:
            return
        for match in _matches(rule, text, folded_words):
            span = rule.secret_span(match)
            if span is None:
                continue
            secret = text[span[0] : span[1]]
            if rule.entropy and shannon_entropy(secret) <= rule.entropy:
                continue
            if rule.entropy and rule.rule_id.startswith("generic") and not _has_digit(secret):
                continue
            start = _name_start(text, match.start()) if rule.is_template else match.start()
            line = _line_around(text, start, match.end())
            matched = text[start : match.end()]
            lists = (*rule.allowlists, self.global_allowlist)
            if any(allow.allows(secret, matched, line) for allow in lists):
                continue
            yield span


@dataclass(frozen=True)
class KeywordScan:
    """Which of a set of lowercase keywords occur in a text, in one C-level regex scan.

    ``present(lowered)`` equals ``{k for k in keywords if k in lowered}``. The pattern
    is a lookahead over the keywords as a prefix tree (``a(?:pi|ccess|uth)…``): at each
    offset the engine follows at most one branch and captures the longest keyword
    starting there, without consuming it, so ``findall`` reports one keyword per
    offset where any starts. Every keyword that occurs is a prefix of the longest
    keyword starting at the same offset, so ``prefixes`` (built once) completes the set.

    No keyword holds a character outside ``runs``' class (space, quote, slash, colon
    …), so the keywords of a text are those of its runs of keyword characters; a run
    of up to ``_MEMO_RUN_CHARS`` is scanned once and remembered (status lines and
    digests repeat their words), up to ``_MEMO_ENTRIES`` runs.

    When the keyword characters are ASCII and not whitespace (the vendored ruleset),
    the runs are cut in C: the text encoded one byte per character (a non-ASCII one
    as ``?``, not a keyword character), every other byte translated to a space, then
    ``bytes.split``; a text whose runs are all remembered is answered by one union.
    """

    keywords: tuple[str, ...]
    pattern: re.Pattern[str]
    prefixes: dict[str, tuple[str, ...]]
    runs: re.Pattern[str]
    run_table: bytes | None = None
    """``bytes.translate`` table keeping the keyword bytes, the rest as spaces (or None)."""
    memo: list[tuple[set[bytes], dict[bytes, frozenset[str]]]] = field(
        default_factory=lambda: [(set(), {})], compare=False, repr=False
    )

    @classmethod
    def build(cls, keywords: tuple[str, ...]) -> KeywordScan:
        """Compile the scan for non-empty ``keywords`` (lowercase, as gitleaks lists them)."""
        prefixes = {k: tuple(other for other in keywords if k.startswith(other)) for k in keywords}
        pattern = re.compile("(?=(" + _prefix_tree_regex(keywords) + "))")
        alphabet = "".join(sorted(set("".join(keywords))))
        runs = re.compile("[" + re.escape(alphabet) + "]+")
        return cls(keywords, pattern, prefixes, runs, _run_table(alphabet))

    def present(self, lowered: str) -> frozenset[str]:
        """The keywords that occur in ``lowered`` (plain substring test, case as given)."""
        if self.run_table is None:
            return self._present_in_runs([run.encode() for run in self.runs.findall(lowered)])
        runs = lowered.encode("ascii", "replace").translate(self.run_table).split()
        seen, hits = self.memo[0]
        if seen.issuperset(runs):
            return frozenset().union(*filter(None, map(hits.get, runs)))
        return self._present_in_runs(set(runs))

    def _present_in_runs(self, runs: Iterable[bytes]) -> frozenset[str]:
        """The keywords of ``runs`` (UTF-8 bytes), remembering the short runs.

        ``memo[0]`` is (runs seen, run → its keywords when it has any). A run's keywords
        are stored before the run is marked seen, and a full memo is replaced, never
        emptied: a reader holding the pair finds the keywords of every run seen."""
        present: set[str] = set()
        for run in runs:
            seen, hits = self.memo[0]
            if run in seen:
                found = hits.get(run, frozenset())
            else:
                found = self._scan(run.decode())
                if len(run) <= _MEMO_RUN_CHARS:
                    if len(seen) >= _MEMO_ENTRIES:
                        seen, hits = self.memo[0] = (set(), {})
                    if found:
                        hits[run] = found
                    seen.add(run)
            present |= found
        return frozenset(present)

    def _scan(self, text: str) -> frozenset[str]:
        found: set[str] = set()
        for longest in set(self.pattern.findall(text)):
            found.update(self.prefixes[longest])
        return frozenset(found)


_MEMO_RUN_CHARS = 64
_MEMO_ENTRIES = 8192
# A word the redactor looks for in one ``KeywordScan`` of a text's runs, with the rule
# keywords: lowercase, at least two characters, none of them a separator.
SCAN_WORD = re.compile(r"[a-z0-9_.-]{2,}")


def _run_table(alphabet: str) -> bytes | None:
    """The ``bytes.translate`` table of ``KeywordScan.run_table`` for ``alphabet``, or
    None when a keyword character is not ASCII, is whitespace or is ``?`` (the
    stand-in for a non-ASCII character): then ``bytes.split`` would not cut the runs
    the regex finds."""
    if not alphabet.isascii() or "?" in alphabet or any(c.isspace() for c in alphabet):
        return None
    keep = alphabet.encode()
    return bytes(byte if byte in keep else 32 for byte in range(256))


def _prefix_tree_regex(words: tuple[str, ...]) -> str:
    """A regex matching, at an offset, the longest of ``words`` that starts there:
    the words as a prefix tree, single-child chains as one literal, a word that is a
    prefix of others as an optional (greedy, so longest-first) continuation."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _subtree_regex(root)


def _subtree_regex(node: dict[str, dict]) -> str:
    branches = []
    for char in sorted(c for c in node if c):
        label, child = char, node[char]
        while "" not in child and len(child) == 1:
            ((next_char, child),) = child.items()
            label += next_char
        branches.append(re.escape(label) + _subtree_regex(child))
    if not branches:
        return ""
    group = "(?:" + "|".join(branches) + ")"
    return group + "?" if "" in node else group


# gitleaks' "keyword, up to 20 name chars, separator, value" template: a match starts
# at most 50 name characters before its keyword, on the keyword's line.
_KEYWORD_TEMPLATE_PREFIX = r"(?i)[\w.-]{0,50}?(?:"


def _matches(
    rule: SecretRule, text: str, folded_words: frozenset[str] | None = None
) -> Iterator[re.Match[str]]:
    """``rule.pattern.finditer(text)``; for template rules only on the lines holding a
    keyword (and the line after, for a value on the next line). Python's engine
    backtracks where Go's RE2 does not: scanning a 50 KB file with the template at
    every offset costs ~100 ms, its keyword lines a few.

    Where the rule's start words are sparse (fewer than one per ``_CHARS_PER_ANCHOR``
    characters scanned), the pattern is only tried at them (``anchors``); a pattern
    ``re`` already skips to by its literal head, or dense start words, are scanned.
    Both ways find the same matches."""
    assert rule.pattern is not None
    words = rule.start_words
    if words is not None and folded_words is not None and rule.start_words_scanned:
        words = tuple(word for word in words if word in folded_words)
        if not words:
            return  # no match can start anywhere
    elif words is not None and not _holds_any(case_fold(text), words):
        return  # no match can start anywhere
    if not rule.is_template:
        offsets = _sparse_offsets(rule, text, len(text), words)
        if offsets is None:
            yield from rule.pattern.finditer(text)
        else:
            yield from anchored_finditer(rule.pattern, text, offsets, len(text))
        return
    windows = _keyword_windows(text, rule.keywords)
    offsets = _sparse_offsets(rule, text, sum(end - start for start, end in windows), words)
    for start, end in windows:
        if offsets is None:
            yield from rule.pattern.finditer(text, start, end)
        else:
            starts = offsets[bisect_left(offsets, start) : bisect_left(offsets, end)]
            yield from anchored_finditer(rule.pattern, text, starts, end)


def _holds_any(folded: str, words: tuple[str, ...]) -> bool:
    for word in words:
        if word in folded:
            return True
    return False


_CHARS_PER_ANCHOR = 8
# A pattern opening with a literal character: ``re`` finds its head by itself, fast.
_LITERAL_HEAD = re.compile(r"[A-Za-z0-9_-]")


def _sparse_offsets(
    rule: SecretRule, text: str, scanned: int, words: tuple[str, ...] | None
) -> list[int] | None:
    """Offsets of ``words`` (``rule.start_words``, or those of them in the text) in
    ``text`` when worth trying one by one, else None."""
    if not scanned or words is None or rule.literal_head:
        return None
    limit = scanned // _CHARS_PER_ANCHOR
    return word_offsets_up_to(case_fold(text), words, limit)


def _keyword_windows(text: str, keywords: tuple[str, ...]) -> list[tuple[int, int]]:
    lowered = text.lower()
    if "\n" not in text:  # one line: its window is the whole text, if a keyword is in it
        for keyword in keywords:
            if keyword in lowered:
                return [(0, len(text))]
        return []
    windows: list[tuple[int, int]] = []
    for keyword in keywords:
        at = lowered.find(keyword)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            next_end = text.find("\n", line_end + 1) if line_end >= 0 else -1
            end = len(text) if line_end < 0 or next_end < 0 else next_end
            windows.append((start, end))
            at = lowered.find(keyword, max(at + 1, line_end if line_end >= 0 else len(text)))
    windows.sort()
    merged: list[tuple[int, int]] = []
    for start, end in windows:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _name_start(text: str, keyword_at: int) -> int:
    """Where the template's ``[\\w.-]{0,50}?`` would have started the match: up to 50
    name characters left of the keyword (the leftmost, as a left-to-right scan finds)."""
    start = keyword_at
    while start > 0 and keyword_at - start < 50 and text[start - 1] in _NAME_CHARS:
        start -= 1
    return start


def _has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def _line_around(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return text[line_start : line_end if line_end >= 0 else len(text)]


def _allowlist(raw: dict[str, Any]) -> Allowlist:
    return Allowlist(
        regex_sources=tuple(str(r) for r in raw.get("regexes", ())),
        stopwords=tuple(str(w).lower() for w in raw.get("stopwords", ())),
        target=str(raw.get("regexTarget", "secret")),
        require_all=str(raw.get("condition", "OR")).upper() == "AND",
        has_paths=bool(raw.get("paths")),
    )


def _rule(raw: dict[str, Any]) -> SecretRule:
    return SecretRule(
        rule_id=str(raw["id"]),
        source=str(raw["regex"]),
        keywords=tuple(str(k).lower() for k in raw.get("keywords", ())),
        entropy=float(raw.get("entropy", 0.0)),
        secret_group=int(raw.get("secretGroup", 0)),
        allowlists=tuple(_allowlist(a) for a in raw.get("allowlists", ())),
    )


@cache
def load_ruleset(path: Path = RULES_FILE) -> Ruleset:
    """Parse the vendored rules file (cached per path).

    Left out, with the reason in ``Ruleset.skipped``: rules scoped to file paths,
    rules without a pattern or keywords (a rule without keywords would run on every
    text). A pattern Python cannot compile is left out when first used (logged).
    Raises ``OSError`` or
    ``tomllib.TOMLDecodeError`` only if the vendored file itself is missing or broken.
    """
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rules: list[SecretRule] = []
    skipped: dict[str, str] = {}
    for raw in data.get("rules", ()):
        rule_id = str(raw.get("id", "?"))
        if "path" in raw:
            skipped[rule_id] = "scoped to file paths"
        elif "regex" not in raw or not raw.get("keywords"):
            skipped[rule_id] = "no pattern or no keywords"
        else:
            rules.append(_rule(raw))
    global_allowlist = _allowlist(data.get("allowlist", {}) | {"paths": []})
    return Ruleset(tuple(rules), global_allowlist, skipped)
