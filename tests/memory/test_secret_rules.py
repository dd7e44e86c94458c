"""The vendored gitleaks rules: every pattern usable from Python, prefilter and allowlists."""

from __future__ import annotations

import re
import warnings

from clio_acp.memory.secret_rules import (
    RULES_FILE,
    go_regex_to_python,
    load_ruleset,
    shannon_entropy,
)


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
