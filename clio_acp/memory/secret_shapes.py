"""Secret shapes of our own, beyond MEMORY_SPEC §8 and the vendored gitleaks rules.

Owns the shapes the vendored scanner rules do not cover because they are not
services: auth headers, credentials in URLs and queries, connection strings,
env-style and quoted assignments, Docker ``auth`` and ``.netrc`` entries, a few
well-known prefixes; and the generic token detectors — a long mixed-case token of
high entropy that does not read like an identifier, or lowercase hex after a short
prefix (``sbp_…``, ``key-…``). ``clio_acp.memory.redact`` decides the order.
Pure: no I/O, nothing imported from above ``clio_acp.memory``.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import NamedTuple

from clio_acp.memory.secret_rules import SCAN_WORD, shannon_entropy
from clio_acp.memory.secret_rules.anchors import pattern_start_words

__all__ = [
    "EXTRA_SHAPES",
    "QUOTED_ASSIGNMENT",
    "QUOTED_ASSIGNMENT_GUARDS",
    "QUOTED_ASSIGNMENT_STARTS",
    "SCAN_WORD",
    "TOKEN_KIND",
    "ExtraShape",
    "Guard",
    "token_spans",
]


@dataclass(frozen=True)
class Guard:
    """Literals of which one occurs in every text a pattern matches: a necessary
    condition, so a pass whose guard finds none of them can be skipped without
    changing any result (``tests/memory/test_redact_guards.py`` checks each guard
    against its pattern). Cheap: a few substring tests instead of a regex pass.

    ``case_free`` words (lowercase) stand for a case-insensitive pattern and are
    looked up in ``case_fold(text)``.
    """

    words: tuple[str, ...]
    case_free: bool = False
    scan_words: frozenset[str] | None = field(default=None, init=False, compare=False, repr=False)
    """The words lowercased when each is a scan word (``SCAN_WORD``), else None."""

    def __post_init__(self) -> None:
        lowered = frozenset(word.lower() for word in self.words)
        scannable = all(SCAN_WORD.fullmatch(word) for word in lowered)
        object.__setattr__(self, "scan_words", lowered if scannable else None)

    def may_match(self, text: str, folded: str) -> bool:
        """False only when the guarded pattern cannot match ``text`` (``folded`` is
        ``case_fold(text)``)."""
        subject = folded if self.case_free else text
        for word in self.words:  # a loop, not any(): this runs on every redaction
            if word in subject:
                return True
        return False


_TOKEN_CHARS = r"[A-Za-z0-9._~+/-]"
# Secret-flavoured names beyond §8's words, as config files and shells spell them
# (from the key word on: what precedes it in the name does not matter).
_SECRET_NAME = (
    r"(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|pwd|pass|passphrase"
    r"|credentials?|auth|private[_-]?key|access[_-]?key)[A-Za-z0-9_.-]*"
)

# Runs after §8 ``assignment``: a quoted value after a secret-flavoured name is one
# value, whatever it holds (``SECRET_KEY = 'a&b#c…'`` keeps its tail after the
# first ``&`` from ``assignment``). Group ``secret`` is what is replaced, markers
# inside it included, unless it is exactly one marker already.
QUOTED_ASSIGNMENT = re.compile(
    r"(?i)" + _SECRET_NAME + r"[\"']?\s*(?::=|=>|[:=])\s*(?P<q>[\"'])"
    r"(?P<secret>(?:(?!(?P=q))[^\n\\\ue000]|\\.){8,256})(?P=q)"
)
# Every ``QUOTED_ASSIGNMENT`` match starts where one of these words does (any case;
# read from the pattern: api, apikey, secret, token, passw, pwd, pass, …)…
QUOTED_ASSIGNMENT_STARTS: tuple[str, ...] = pattern_start_words(QUOTED_ASSIGNMENT.pattern) or ()
# … and holds a word of ``_SECRET_NAME``, a separator and a quote.
QUOTED_ASSIGNMENT_GUARDS = (
    Guard(("key", "secret", "token", "pass", "pwd", "credential", "auth"), case_free=True),
    Guard((":", "=")),
    Guard(("'", '"')),
)


class ExtraShape(NamedTuple):
    """One shape of this module: ``[redacted:<kind>]`` replaces group ``secret``.

    ``needles`` (lowercase) gate the pattern: it runs only when one of them occurs
    in the lowercased text. ``guards`` are pure speed: each must find one of its
    words in the text, which every match guarantees (``Guard``).
    """

    kind: str
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    guards: tuple[Guard, ...] = ()


_CONNECTION_KEYS = r"(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)"
_ENV_SECRET_WORDS = (
    "PWD|PASS|PASSWD|PASSWORD|PASSPHRASE|AUTH|KEY|SECRET|TOKEN|CREDENTIALS?|SIG|SAS|PRIVATE"
)

# Shapes this module adds after ``assignment``, in order. Spans inside an existing
# marker are skipped.
EXTRA_SHAPES: tuple[ExtraShape, ...] = (
    ExtraShape(
        "auth-header",
        ("authorization",),
        re.compile(
            r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
            r"(?:(?:bearer|basic|digest|token|bot|negotiate|apikey)\s+)?"
            r"(?!(?:bearer|basic|digest|token|bot|negotiate|apikey)\b)"
            rf"(?P<secret>{_TOKEN_CHARS}{{6,}}=*)"
        ),
    ),
    ExtraShape(
        "auth-header",
        ("bearer", "basic"),
        # A bare scheme and credentials: at least 16 characters, or 8 with a digit,
        # so prose ("Basic authentication") stays.
        re.compile(
            rf"\b(?:Bearer|bearer|BEARER|Basic|basic|BASIC)\s+(?P<secret>(?={_TOKEN_CHARS}*[0-9])"
            rf"{_TOKEN_CHARS}{{8,}}=*|{_TOKEN_CHARS}{{16,}}=*)"
        ),
    ),
    ExtraShape(
        "url-credentials",
        ("://",),
        re.compile(
            r"://(?<=[A-Za-z0-9]://)[^\s/?#@:\"'<>]{0,256}:"
            r"(?P<secret>[^\s/?#@\"'<>]{3,256})@"
        ),
    ),
    ExtraShape(
        "url-query-secret",
        ("=",),
        re.compile(
            r"(?i)[?&;](?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token"
            r"|x-goog-signature|key|apikey|client_secret|access_token|refresh_token|auth)"
            r"=(?P<secret>[^&\s#\"'<>]{8,})"
        ),
    ),
    ExtraShape(
        "connection-string",
        ("=",),
        re.compile(r"(?i)\b" + _CONNECTION_KEYS + r"\s*=\s*(?P<secret>[^;\s\"'<>]{6,})"),
        (Guard(("accountkey", "sharedaccess", "password", "pwd"), case_free=True),),
    ),
    ExtraShape(
        "env-assignment",
        ("=", ":"),
        # An upper-case variable named like a secret (MYSQL_PWD, REDIS_PASS,
        # STRIPE_KEY, DOCKER_AUTH …); not a ``$VAR`` reference.
        re.compile(
            r"\b[A-Z][A-Z0-9_]*(?:" + _ENV_SECRET_WORDS + r")[\"']?\s*[:=]\s*[\"']?"
            r"(?![$])(?P<secret>[^\s\"'`;,&|<>]{6,})"
        ),
        (
            Guard(
                (
                    "PWD",
                    "PASS",
                    "AUTH",
                    "KEY",
                    "SECRET",
                    "TOKEN",
                    "CREDENTIAL",
                    "SIG",
                    "SAS",
                    "PRIVATE",
                )
            ),
        ),
    ),
    ExtraShape(
        "docker-auth",
        ('"auth"', 'token"'),
        re.compile(
            r"\"(?:auth|identitytoken|registrytoken)\"\s*:\s*\"(?P<secret>[A-Za-z0-9+/=_.-]{8,})\""
        ),
    ),
    ExtraShape(
        "netrc-password",
        ("password",),
        re.compile(r"\blogin\s+\S+\s+password\s+(?P<secret>\S{3,})"),
        (Guard(("login",)),),
    ),
    ExtraShape(
        "discord-webhook",
        ("webhooks/",),
        re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[A-Za-z0-9_-]{20,})"),
    ),
    # Well-known prefixes the vendored rules do not cover.
    ExtraShape(
        "stripe-webhook-secret", ("whsec_",), re.compile(r"(?P<secret>whsec_[A-Za-z0-9+/=]{20,})")
    ),
    ExtraShape(
        "google-oauth-token", ("ya29.",), re.compile(r"(?P<secret>ya29\.[A-Za-z0-9_-]{20,})")
    ),
    ExtraShape("google-oauth-token", ("1//0",), re.compile(r"(?P<secret>1//0[A-Za-z0-9_-]{30,})")),
    ExtraShape(
        "google-client-secret", ("gocspx-",), re.compile(r"(?P<secret>GOCSPX-[A-Za-z0-9_-]{20,})")
    ),
    ExtraShape(
        "telegram-bot-token",
        (":aa",),
        re.compile(r"(?<![0-9])(?P<secret>[0-9]{8,10}:AA[A-Za-z0-9_-]{33})(?![A-Za-z0-9_-])"),
    ),
)

TOKEN_KIND = "high-entropy-token"

# A run of token characters at least 24 long, not glued to other token characters.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_+/=.-])[A-Za-z0-9][A-Za-z0-9_+/-]{23,}={0,3}(?![A-Za-z0-9_+/=.-])"
)
# A span of either shape below needs 24 token characters in a row (a 24+ token; a
# prefix and 32 hex) and 14 letters or digits in a row (``_looks_random`` wants a
# separator-free segment of 14; the hex is 32): a text without both is skipped.
_LONG_RUN = re.compile(r"[A-Za-z0-9_+/-]{24}")
_LONG_SEGMENT = re.compile(r"[A-Za-z0-9]{14}")


def _class_table(chars: str) -> bytes:
    """``bytes.translate`` table: the bytes of ``chars`` become ``a``, the rest spaces."""
    keep = chars.encode("ascii")
    return bytes(97 if byte in keep else 32 for byte in range(256))


# The two searches above by bytes (they try every offset: ~30 ns a character on a
# short text of many short words): the text one byte per character (a non-ASCII one
# as "?", in neither class), each class's bytes translated to "a", then one substring
# test. tests/memory/test_redact_guards.py compares both ways.
_SEGMENT_TABLE = _class_table(string.ascii_letters + string.digits)
_RUN_TABLE = _class_table(string.ascii_letters + string.digits + "_+/-")


def _has_long_runs(text: str) -> bool:
    """``_LONG_SEGMENT.search(text) and _LONG_RUN.search(text)``, as a bool."""
    raw = text.encode("ascii", "replace")
    return b"a" * 14 in raw.translate(_SEGMENT_TABLE) and b"a" * 24 in raw.translate(_RUN_TABLE)


# Word-like runs: an identifier (``JSONReaderUTF16VectorTest``, ``GetSlowCompTauX20``)
# is mostly made of them, a random token is not.
_WORDISH = re.compile(r"[a-z]{4,}|[A-Z]{4,}")
_CAMEL_WORD = re.compile(r"[A-Z][a-z]{2,}")
_SEGMENT_SPLIT = re.compile(r"[/_+=-]")
_MIN_SEGMENT = 14
# Lowercase hex after a short prefix: ``sbp_<40 hex>``, ``key-<32 hex>``, ``lsv2_pt_<hex>``.
_PREFIXED_HEX = re.compile(
    r"(?<![A-Za-z0-9])(?P<prefix>(?:[a-z][a-z0-9]{1,7}[_-]){1,2})"
    r"(?P<secret>[0-9a-f]{32,}(?:_[0-9a-f]{6,})?)(?![0-9A-Za-z])"
)
# Prefixes of hashes and identifiers that are not credentials.
_NOT_SECRET_PREFIXES = frozenset(
    "sha sha1 sha256 sha384 sha512 md5 commit hash digest rev id uuid sess session run "
    "trace span req request build cache blob tree object file node chatcmpl msg call".split()
)


def _looks_random(token: str) -> bool:
    """True when a separator-free segment of at least 14 characters mixes upper and
    lower case (two of each) and digits, has entropy >= 3.3 bits/char, and is less than
    half word-like (measured on 3,000 generated tokens and the identifiers of this
    repository, its dependencies and the shared trajectories: ~7 % of random tokens
    missed, identifiers kept)."""
    for segment in _SEGMENT_SPLIT.split(token):
        if len(segment) < _MIN_SEGMENT:
            continue
        uppers = sum(ch.isupper() for ch in segment)
        lowers = sum(ch.islower() for ch in segment)
        digits = sum(ch.isdigit() for ch in segment)
        if min(uppers, lowers) < 2 or not digits or shannon_entropy(segment) < 3.3:
            continue
        wordish = max(
            sum(len(run) for run in _WORDISH.findall(segment)),
            sum(len(run) for run in _CAMEL_WORD.findall(segment)),
        )
        if wordish * 2 < len(segment):
            return True
    return False


def token_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are generic secret tokens (module docstring), in order.

    Catches the long tail of provider tokens no rule names (``gsk_…``, ``figd_…``,
    ``dckr_pat_…``) at the price of also hiding other random identifiers (request
    ids); identifiers made of words, paths, hashes and UUIDs stay."""
    if _has_long_runs(text):
        return _scan_tokens(text)
    return []


def _scan_tokens(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _TOKEN.finditer(text) if _looks_random(m.group())]
    for match in _PREFIXED_HEX.finditer(text):
        prefix = match.group("prefix").rstrip("_-").split("_")[0].split("-")[0]
        secret = match.group("secret")
        if (
            prefix in _NOT_SECRET_PREFIXES
            or secret.isdigit()
            or not any(c.isdigit() for c in secret)
        ):
            continue
        spans.append(match.span("secret"))
    return sorted(spans)
