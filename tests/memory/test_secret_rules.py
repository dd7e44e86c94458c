"""The vendored gitleaks rules: every pattern usable from Python, prefilter and allowlists."""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.secret_rules import (
    RULES_FILE,
    KeywordScan,
    _keyword_windows,
    _matches,
    go_regex_to_python,
    load_ruleset,
    shannon_entropy,
)
from clio_acp.memory.secret_rules.anchors import (
    anchored_finditer,
    case_fold,
    leading_words,
    word_offsets,
)
from tests.support.secrets import corpus

_KEYWORDS = sorted({keyword for rule in load_ruleset().rules for keyword in rule.keywords})


@st.composite
def _keyword_fragment(draw: st.DrawFn) -> str:
    """A keyword, or a prefix / suffix / middle of one, in random case."""
    keyword = draw(st.sampled_from(_KEYWORDS))
    start = draw(st.integers(0, len(keyword) - 1))
    end = draw(st.integers(start + 1, len(keyword)))
    piece = draw(st.sampled_from([keyword, keyword[start:end], keyword[:end], keyword[start:]]))
    flips = draw(st.lists(st.booleans(), min_size=len(piece), max_size=len(piece)))
    return "".join(c.upper() if flip else c for c, flip in zip(piece, flips, strict=True))


# Keyword fragments glued to each other and to filler, including characters whose
# lowercase differs in length or maps onto ASCII (İ, Kelvin sign K, long s ſ).
_TEXTS = st.lists(
    st.one_of(
        _keyword_fragment(),
        st.text(alphabet="aeikstxy_-.=:/ \n0123456789İKſ", max_size=6),
        st.text(max_size=4),
    ),
    max_size=24,
).map("".join)


def _naive_candidates(lowered: str) -> list[str]:
    return [r.rule_id for r in load_ruleset().rules if any(k in lowered for k in r.keywords)]


@settings(max_examples=250, deadline=None)
@given(_TEXTS)
def test_one_scan_selects_exactly_the_rules_a_substring_test_per_keyword_selects(
    text: str,
) -> None:
    lowered = text.lower()
    assert [rule.rule_id for rule in load_ruleset().candidates(lowered)] == _naive_candidates(
        lowered
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="abc.-", min_size=1, max_size=5), min_size=1, max_size=8),
    st.text(alphabet="abc.-", max_size=40),
)
def test_keyword_scan_finds_overlapping_and_nested_keywords(keywords: list[str], text: str) -> None:
    # A small alphabet makes keywords that are prefixes, suffixes and overlaps of
    # each other (``ab``, ``abc``, ``bca``) the common case.
    unique = tuple(dict.fromkeys(keywords))
    scan = KeywordScan.build(unique)
    assert scan.present(text) == {k for k in unique if k in text}
    assert scan.present(text) == {k for k in unique if k in text}  # runs remembered


@functools.cache
def _vendored_keywords() -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for r in load_ruleset().rules for k in r.keywords))


@functools.cache
def _byte_cut_scan() -> KeywordScan:
    return KeywordScan.build(_vendored_keywords())


@functools.cache
def _regex_cut_scan() -> KeywordScan:
    """Runs cut by regex, built once (~10 ms a build): its remembered runs carry over
    from example to example, as in a long session; a plain substring test checks it."""
    return KeywordScan.build((*_vendored_keywords(), "x y"))


@settings(max_examples=250, deadline=None)
@given(_TEXTS)
def test_keyword_scan_remembered_runs_give_the_same_keywords(text: str) -> None:
    # A fresh scan cuts the runs by bytes; the second call answers from remembered
    # runs; the regex-cut scan (a keyword alphabet bytes cannot cut) is the reference.
    keywords = _vendored_keywords()
    scan = dataclasses.replace(_byte_cut_scan(), memo=[(set(), {})])  # nothing remembered
    by_regex = _regex_cut_scan()
    assert scan.run_table is not None and by_regex.run_table is None
    lowered = text.lower()
    expected = {k for k in keywords if k in lowered}
    assert scan.present(lowered) == expected
    assert scan.present(lowered) == expected
    assert by_regex.present(lowered) - {"x y"} == expected


def test_vendored_file_ships_with_its_licence_and_update_procedure() -> None:
    folder = RULES_FILE.parent
    assert "MIT License" in (folder / "LICENSE").read_text(encoding="utf-8")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "## Updating" in readme and "b58d3f10" in readme


def test_every_rule_and_allowlist_compiles_without_warnings() -> None:
    ruleset = load_ruleset()
    assert len(ruleset.rules) >= 200
    assert set(ruleset.skipped) == {
        "freemius-secret-key",
        "hashicorp-tf-password",
        "kubernetes-secret-yaml",
        "nuget-config-password",
        "pkcs12-file",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rule in ruleset.rules:
            re.compile(go_regex_to_python(rule.source))
            for allowlist in rule.allowlists:
                for source in allowlist.regex_sources:
                    re.compile(go_regex_to_python(source))


def test_mid_pattern_flags_scope_to_the_rest_of_their_group() -> None:
    assert go_regex_to_python(r"\b(p8e-(?i)[a-z]{3})x") == r"\b(p8e-(?i:[a-z]{3}))x"
    assert go_regex_to_python(r"a(?i)b|c") == r"a(?i:b)|(?i:c)"
    assert go_regex_to_python(r"(?i)ab") == r"(?i)ab"
    assert go_regex_to_python(r"x[[:alnum:]]\z") == r"x[a-zA-Z0-9]\Z"
    pattern = re.compile(go_regex_to_python(r"\b(p8e-(?i)[a-z]{3})x"))
    assert pattern.search("p8e-ABCx") and not pattern.search("P8E-abcx")


def test_keyword_prefilter_selects_only_rules_whose_keyword_occurs() -> None:
    ruleset = load_ruleset()
    assert ruleset.candidates("nothing to see here") == []
    ids = {rule.rule_id for rule in ruleset.candidates("export glpat-abc")}
    assert "gitlab-pat" in ids and "github-pat" not in ids


def test_entropy_floor_and_allowlists_drop_non_secrets() -> None:
    ruleset = load_ruleset()
    (rule,) = [r for r in ruleset.rules if r.rule_id == "generic-api-key"]
    assert list(ruleset.secret_spans(rule, "api_key = aaaaaaaaaaaaaaaa1")) == []
    assert list(ruleset.secret_spans(rule, "secret_length = 1234567890abc")) == []
    text = "client_key = 9fQ2xL7pW3mZ8rT1vB6n"
    ((start, end),) = ruleset.secret_spans(rule, text)
    assert text[start:end] == "9fQ2xL7pW3mZ8rT1vB6n"
    assert shannon_entropy("") == 0.0 and shannon_entropy("ab") == 1.0


def test_template_rules_only_scan_keyword_lines_but_find_values_on_the_next() -> None:
    ruleset = load_ruleset()
    (rule,) = [r for r in ruleset.rules if r.rule_id == "generic-api-key"]
    filler = "plain line of code\n" * 200
    text = filler + "credential =\n  '9fQ2xL7pW3mZ8rT1vB6n'\n" + filler
    ((start, end),) = ruleset.secret_spans(rule, text)
    assert text[start:end] == "9fQ2xL7pW3mZ8rT1vB6n"


_RULES = load_ruleset().rules
_ODD_CASE = str.maketrans({"s": "\u017f", "k": "\u212a", "i": "\u0131", "I": "\u0130"})
_CORPUS_PIECES = [s.text for s in corpus()]


@st.composite
def _rule_case(draw: st.DrawFn) -> tuple[object, str]:
    """A rule and a text of its words (any case), separators, token-like runs and
    corpus secrets."""
    rule = draw(st.sampled_from(_RULES))
    words = [*rule.keywords, *(rule.start_words or ()), "lob", "api", "ey", "s."]
    word = st.sampled_from(words).flatmap(
        lambda w: st.sampled_from([w, w.upper(), w.title(), w.translate(_ODD_CASE)])
    )
    piece = st.one_of(
        word,
        st.sampled_from([" = ", ":", "=>", ",", "\n", " ", "'", '"', "_", "-", ".", "::="]),
        st.text(alphabet="aZq09fAF_-./+=", min_size=1, max_size=80),
        st.sampled_from(["9fQ2xL7pW3mZ8rT1vB6n", "live_" + "a1" * 17 + "b", "x" * 40]),
        st.sampled_from(_CORPUS_PIECES),
        st.text(max_size=3),
    )
    return rule, "".join(draw(st.lists(piece, max_size=14)))


def _scanned(rule, text: str) -> list[tuple[int, int]]:
    if not rule.is_template:
        return [m.span() for m in rule.pattern.finditer(text)]
    windows = _keyword_windows(text, rule.keywords)
    return [m.span() for s, e in windows for m in rule.pattern.finditer(text, s, e)]


def _anchored(rule, text: str) -> list[tuple[int, int]]:
    offsets = word_offsets(case_fold(text), rule.start_words)
    if not rule.is_template:
        return [m.span() for m in anchored_finditer(rule.pattern, text, offsets, len(text))]
    spans = []
    for start, end in _keyword_windows(text, rule.keywords):
        inside = [at for at in offsets if start <= at < end]
        spans += [m.span() for m in anchored_finditer(rule.pattern, text, inside, end)]
    return spans


@settings(max_examples=300, deadline=None)
@given(_rule_case())
def test_rules_tried_at_their_start_words_find_what_a_full_scan_finds(case) -> None:
    rule, text = case
    scanned = _scanned(rule, text)
    if rule.start_words is not None:
        assert _anchored(rule, text) == scanned
    assert [m.span() for m in _matches(rule, text)] == scanned


def _windows_by_lines(text: str, keywords: tuple[str, ...]) -> list[tuple[int, int]]:
    """Each line holding a keyword (lowercased text, its offsets) and the line after,
    overlapping windows merged: ``_keyword_windows`` as written before its one-line
    shortcut."""
    lowered = text.lower()
    windows = []
    for keyword in keywords:
        at = lowered.find(keyword)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            next_end = text.find("\n", line_end + 1) if line_end >= 0 else -1
            end = len(text) if line_end < 0 or next_end < 0 else next_end
            windows.append((start, end))
            at = lowered.find(keyword, max(at + 1, line_end if line_end >= 0 else len(text)))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


@settings(max_examples=300, deadline=None)
@given(_rule_case())
def test_keyword_windows_of_one_line_and_of_many_match_the_line_by_line_definition(case) -> None:
    rule, text = case
    for subject in (text, text.replace("\n", " ")):
        assert _keyword_windows(subject, rule.keywords) == _windows_by_lines(subject, rule.keywords)


def test_literal_head_is_read_from_the_source() -> None:
    heads = {rule.rule_id: rule.literal_head for rule in _RULES}
    assert heads["generic-api-key"] is False and heads["jwt"] is False
    assert all(rule.literal_head == rule.source[:1].isalnum() or rule.source[:1] in "_-"
               for rule in _RULES)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_rule_case())
def test_start_words_known_from_a_word_scan_find_what_searching_for_them_finds(case) -> None:
    rule, text = case
    folded = case_fold(text)
    found = frozenset(w for w in (rule.start_words or ()) if w in folded) | {"zz", "unrelated"}
    assert [m.span() for m in _matches(rule, text, found)] == [
        m.span() for m in _matches(rule, text)
    ]
    ruleset = load_ruleset()
    assert list(ruleset.secret_spans(rule, text, found)) == list(ruleset.secret_spans(rule, text))


def test_start_words_scanned_only_when_each_is_a_scan_word() -> None:
    scanned = {rule.rule_id: rule.start_words_scanned for rule in _RULES}
    assert scanned["jwt"] and scanned["generic-api-key"] and scanned["vault-service-token"]
    assert not scanned["microsoft-teams-webhook"]  # "https://"
    assert not any(scanned[r.rule_id] for r in _RULES if r.start_words is None)


def test_corpus_findings_are_the_same_with_start_words() -> None:
    text = "\n".join(_CORPUS_PIECES)
    for rule in _RULES:
        scanned = _scanned(rule, text)
        assert [m.span() for m in _matches(rule, text)] == scanned, rule.rule_id
        if rule.start_words is not None:
            assert _anchored(rule, text) == scanned, rule.rule_id


def test_most_rules_are_tried_only_at_their_start_words() -> None:
    assert all(rule.start_words for rule in _RULES if rule.is_template)
    assert sum(rule.start_words is None for rule in _RULES) <= 15
    (generic,) = [rule for rule in _RULES if rule.rule_id == "generic-api-key"]
    assert set(generic.start_words) >= {"access", "api", "passw", "token"}
    # A template's pattern can hold a second top-level branch after its keyword group.
    (atlassian,) = [rule for rule in _RULES if rule.rule_id == "atlassian-api-token"]
    assert "atatt3" in atlassian.start_words
    text = "JIRA_API_TOKEN=ATATT3" + "xFfGF0QyR29I3SA324xe7TQO" * 8 + " and more"
    assert _anchored(atlassian, text) == _scanned(atlassian, text) != []
    (vault,) = [rule for rule in _RULES if rule.rule_id == "vault-service-token"]
    assert vault.start_words == ("hvs.", "s.")
    assert leading_words(r"snyk[_.-]?(?:api)?key|(?-i:[Aa]pi|API)") == ("snyk", "api")
    assert leading_words(r"\b(?:sk|rk)_x|\bAKIA") == ("sk", "rk", "akia")
    assert leading_words(r"a|[^x]b") is None and leading_words(r"(?:ab)?c") is None
    assert leading_words(r"\.env|x.y|\dz") is None
    assert leading_words(r"\.env|x.y[^]|]z") == (".env", "x")
    # A quantified atom may be absent or repeated: the word stops before it.
    assert leading_words(r"https?://|ab*c|ab{2}c|ab+c") == ("http", "a")


_STOPWORDS = sorted(
    {w for rule in load_ruleset().rules for a in rule.allowlists for w in a.stopwords}
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_STOPWORDS).flatmap(
                lambda w: st.sampled_from([w, w[1:], w[:-1], w[: len(w) // 2]])
            ),
            st.text(alphabet="abcdefgxyz0129_-.", max_size=6),
        ),
        max_size=6,
    ).map("".join)
)
def test_stopword_scan_agrees_with_a_substring_test_per_stopword(secret: str) -> None:
    for allowlist in {a for rule in load_ruleset().rules for a in rule.allowlists if a.stopwords}:
        naive = any(word in secret for word in allowlist.stopwords)
        assert (allowlist.stopword_pattern.search(secret) is not None) == naive


def test_stopword_scan_finds_every_stopword_alone_and_inside_a_secret() -> None:
    for allowlist in {a for rule in load_ruleset().rules for a in rule.allowlists if a.stopwords}:
        for word in allowlist.stopwords:
            assert allowlist.stopword_pattern.search(word), word
            assert allowlist.stopword_pattern.search("9f" + word + "q"), word
