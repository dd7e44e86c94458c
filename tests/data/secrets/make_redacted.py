"""Regenerate ``redacted.json``: what redaction made of the corpus and of plain texts.

The file pins the redactor's exact output and replacement count for every corpus text,
for all of them joined, and for the developer texts below (no secret, secret-flavoured
words, markers, non-ASCII case variants). A change to the matching engine must leave
every row byte-identical (``tests/memory/test_redact_corpus.py``); regenerate only when
a rule itself changes on purpose, and review the diff.

    python tests/data/secrets/make_redacted.py   # rewrites redacted.json beside this file
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from clio_acp.memory.redact import (  # noqa: E402
    RedactionTally,
    redact_preserving_markers,
    redact_secrets_text,
)

PLAIN_TEXTS = (
    "",
    "ok",
    "collected 48 items\ntests/unit/test_parser.py::test_round_trip PASSED [ 12%]\n",
    "pytest failed: AssertionError in test_token_refresh at line 42, the api key was missing",
    "Requirement from the user: Never edit the tests.",
    'bash{"command":"pytest astropy/table/tests/test_mixin.py"} failed 3 times; first observed '
    "at step 39: a `TypeError` unless another argument overrode the function.",
    "the password field is empty and the secret store said: access denied\n"
    "token refresh failed; credentials expired; auth header missing",
    "export PATH=$HOME/bin:$PATH\nMYSQL_PWD=$SECRET\nREDIS_PASS=${PASS}",
    "login alice password hunter22\nmachine example.com login bob password s3cr3tpass",
    "Authorization: Bearer abc.def.ghi\nProxy-Authorization: Basic dXNlcjpwYXNz",
    "postgres://user:pa55word@db.local:5432/app?sslmode=require&key=0123456789abcdef",
    "AccountKey=abcdefgh12345678;SharedAccessKey=zyxwvut9876;Pwd=letmein1",
    "sha256_" + "0123456789abcdef" * 4 + " key-" + "a1b2c3d4" * 4,
    "JSONReaderUTF16VectorTest GetSlowCompTauX20 " + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9" + " done",
    "token=[redacted:jwt]supersecret and [redacted:assignment]tail",
    "BASE_TOKENS = frozenset({\npassword: Summer2024(!)\nsecret_key = get_secret()",
    "api_key\n  =\n  'longvaluewithdigits123'\n",
    "ſecret='abcdefghijk' Kelvin KEY=abcdefghij İnternal_token: 'vAlUe-123456789'",
    "µs ß ﬅ ϐeta ſk-abcdefghijklmnopqrstuvwx АКIA0123456789ABCDEF",
    # Kelvin sign, dotless i, long s: case variants only a Unicode IGNORECASE matches.
    "\u212aEY=abcdefghij api_\u212aey: 'abcdefghijkl' Author\u0131zation: Bearer abcdefgh1234",
    "pa\u017f\u017fword = 'abcdefgh12' conne\u017f AccountKey=\u212a123456789",
    "\ue000\ue100 secret=\ue000\ue101abcdefgh",
    "hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX s.  sk ey",
)


def _row(text: str) -> dict[str, object]:
    plain, marked = RedactionTally(), RedactionTally()
    return {
        "text": text,
        "redacted": redact_secrets_text(text, plain),
        "count": plain.count,
        "preserved": redact_preserving_markers(text, marked),
        "preservedCount": marked.count,
    }


def main() -> None:
    corpus = json.loads((HERE / "corpus.json").read_text(encoding="utf-8"))["formats"]
    texts = [row["text"] for row in corpus]
    rows = [_row(text) for text in (*texts, "\n".join(texts), *PLAIN_TEXTS)]
    out = HERE / "redacted.json"
    out.write_text(json.dumps({"rows": rows}, ensure_ascii=False, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
