"""Regenerate ``corpus.json``: synthetic, never-valid secrets in the shapes of real ones.

Every value is random text from a fixed seed, shaped like a provider's format (prefix,
alphabet, length); none was ever issued by anyone. Each row gives the format name, a
line of context as a user, a tool or a config file would show it, and the exact secret
substring that must not survive redaction in any sink.

    python tests/data/secrets/make_corpus.py   # rewrites corpus.json beside this file
"""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

SEED = 17
rng = random.Random(SEED)

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
HEX = "0123456789abcdef"
ALNUM = UPPER + LOWER + DIGITS
B32 = UPPER + "234567"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"


def r(alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def mixed(n: int) -> str:
    """Alphanumeric with at least one digit, one upper and one lower letter."""
    return rng.choice(DIGITS) + rng.choice(UPPER) + rng.choice(LOWER) + r(ALNUM, n - 3)


def pem(kind: str) -> str:
    body = "\n".join(r(B64, 64) for _ in range(4))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


def rows() -> list[tuple[str, str, str]]:
    """(format, text with ``{s}`` where the secret goes, secret)."""
    jwt_head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    basic = base64.b64encode(f"deploy:{mixed(14)}".encode()).decode()
    docker = base64.b64encode(f"robot:{mixed(20)}".encode()).decode()
    return [
        ("aws-access-key-id", "export AWS_ACCESS_KEY_ID={s}", "AKIA" + r(B32, 16)),
        ("aws-temporary-key-id", "aws_access_key_id = {s}", "ASIA" + r(B32, 16)),
        ("aws-key-17-chars", "key {s} in the log", "AKIA" + r(B32, 17)),
        ("aws-key-after-underscore", "AWS_KEY_{s}", "AKIA" + r(B32, 16)),
        ("aws-secret-access-key", "aws_secret_access_key = {s}", r(B64, 40)),
        ("github-classic-pat", "git push https://{s}@github.com/o/r", "ghp_" + mixed(36)),
        ("github-pat-then-underscore", "GH={s}_backup", "ghp_" + mixed(36)),
        ("github-oauth", "token: {s}", "gho_" + mixed(36)),
        ("github-app-server", "installation token {s}", "ghs_" + mixed(36)),
        ("github-user-to-server", "({s})", "ghu_" + mixed(36)),
        ("github-fine-grained", "GITHUB_TOKEN={s}", "github_pat_" + mixed(22) + "_" + mixed(59)),
        ("gitlab-pat", "PRIVATE-TOKEN: {s}", "glpat-" + r(URLSAFE, 20)),
        ("gitlab-runner", "runner token {s}.", "glrt-" + r(URLSAFE, 20)),
        ("gitlab-deploy", "deploy with {s}", "gldt-" + r(URLSAFE, 20)),
        ("stripe-live-secret", "Stripe.api_key = '{s}'", "sk_live_" + mixed(24)),
        ("stripe-restricted", "rk: {s}", "rk_live_" + mixed(24)),
        ("stripe-test-secret", "{s}", "sk_test_" + mixed(24)),
        ("stripe-webhook-secret", "endpoint secret {s}", "whsec_" + mixed(32)),
        ("openai-project", "OPENAI_API_KEY={s}", "sk-proj-" + mixed(40)),
        ("openai-legacy", "key={s}", "sk-" + mixed(20) + "T3BlbkFJ" + mixed(20)),
        ("anthropic", "x-api-key: {s}", "sk-ant-api03-" + r(URLSAFE, 93) + "AA"),
        (
            "slack-bot",
            "SLACK_BOT={s}",
            "xoxb-" + r(DIGITS, 12) + "-" + r(DIGITS, 12) + "-" + mixed(24),
        ),
        (
            "slack-user",
            "use {s} here",
            "xoxp-" + r(DIGITS, 12) + "-" + r(DIGITS, 12) + "-" + mixed(24),
        ),
        (
            "slack-app",
            "app token {s}",
            "xapp-1-" + r(UPPER + DIGITS, 11) + "-" + r(DIGITS, 13) + "-" + r(HEX, 64),
        ),
        (
            "slack-webhook",
            "POST {s}",
            "https://hooks.slack.com/services/T"
            + r(UPPER + DIGITS, 8)
            + "/B"
            + r(UPPER + DIGITS, 8)
            + "/"
            + mixed(24),
        ),
        ("google-api-key", "maps key {s}", "AIza" + r(URLSAFE, 35)),
        ("google-oauth-access", "Authorization: Bearer {s}", "ya29." + r(URLSAFE, 60)),
        ("google-oauth-access-bare", "the access token was {s}.", "ya29." + mixed(60)),
        ("google-client-secret", "client_secret {s}", "GOCSPX-" + r(URLSAFE, 28)),
        ("jwt", "cookie session={s}", jwt_head + "." + r(URLSAFE, 40) + "." + r(URLSAFE, 43)),
        ("rsa-private-key", "{s}", pem("RSA ")),
        ("openssh-private-key", "id_ed25519:\n{s}\n", pem("OPENSSH ")),
        ("ec-private-key", "{s}", pem("EC ")),
        ("postgres-url", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", mixed(18)),
        (
            "postgresql-url-in-prose",
            "connect to postgresql://admin:{s}@10.0.0.5/prod then",
            mixed(16),
        ),
        ("redis-url-no-user", "redis://:{s}@cache:6379/0", mixed(20)),
        ("https-basic-in-url", "curl https://ci:{s}@artifacts.example.org/x.tgz", mixed(16)),
        ("mysql-url", "mysql://root:{s}@localhost/db", mixed(12)),
        ("mongodb-srv-url", "mongodb+srv://svc:{s}@cluster0.abcde.mongodb.net/", mixed(20)),
        ("amqp-url", "amqp://guest:{s}@rabbit:5672", mixed(14)),
        ("authorization-bearer", 'curl -H "Authorization: Bearer {s}" https://api', mixed(40)),
        ("authorization-basic", "Authorization: Basic {s}", basic),
        ("bearer-bare", "send Bearer {s} with it", mixed(32)),
        (
            "proxy-authorization",
            "Proxy-Authorization: Basic {s}",
            base64.b64encode(mixed(18).encode()).decode(),
        ),
        ("npm-token", "//registry.npmjs.org/:_authToken={s}", "npm_" + mixed(36)),
        ("pypi-token", "password = {s}", "pypi-AgEIcHlwaS5vcmc" + r(URLSAFE, 60)),
        (
            "azure-storage-account-key",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
            r(B64, 86) + "==",
        ),
        (
            "azure-sas-signature",
            "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030-01-01&sig={s}",
            r(ALNUM, 43) + "%3D",
        ),
        (
            "azure-ad-client-secret",
            "AZURE_CLIENT_SECRET={s}",
            r(ALNUM, 3) + "8Q~" + r(URLSAFE + ".~", 31),
        ),
        ("huggingface", "HF_TOKEN {s}", "hf_" + r(LOWER + UPPER, 34)),
        ("huggingface-in-sentence", "login with {s}, then pull", "hf_" + r(LOWER + UPPER, 34)),
        ("sendgrid", "SENDGRID={s}", "SG." + r(URLSAFE, 22) + "." + r(URLSAFE, 43)),
        ("twilio-api-key", "twilio key {s}", "SK" + r(HEX, 32)),
        ("digitalocean-pat", "doctl auth init -t {s}", "dop_v1_" + r(HEX, 64)),
        ("vault-service-token", "VAULT_TOKEN={s}", "hvs." + mixed(95)),
        ("vault-token-in-header", "X-Vault-Token: {s}", "hvs." + mixed(95)),
        ("shopify-access", "shop token {s}", "shpat_" + r(HEX, 32)),
        ("shopify-shared-secret", "{s}", "shpss_" + r(HEX, 32)),
        (
            "discord-bot",
            "discord_bot_token = '{s}'",
            r(ALNUM, 24) + "." + r(URLSAFE, 6) + "." + r(URLSAFE, 38),
        ),
        (
            "discord-webhook",
            "hook https://discord.com/api/webhooks/" + r(DIGITS, 18) + "/{s}",
            r(URLSAFE, 68),
        ),
        ("telegram-bot", "TELEGRAM_BOT_TOKEN={s}", r(DIGITS, 10) + ":AA" + r(URLSAFE, 33)),
        ("telegram-bot-bare", "the bot {s} answers", r(DIGITS, 10) + ":AA" + r(URLSAFE, 33)),
        ("mysql-pwd-env", "MYSQL_PWD={s} mysql -u root", mixed(12)),
        ("pgpassword-env", "PGPASSWORD='{s}' psql", mixed(14)),
        ("redis-pass-env", "export REDIS_PASS={s}", mixed(16)),
        ("docker-config-auth", '{{"auths": {{"registry.io": {{"auth": "{s}"}}}}}}', docker),
        ("yaml-password", "db:\n  password: {s}\n", mixed(16)),
        ("json-api-key", '{{"api_key": "{s}"}}', r(HEX, 32)),
        (
            "django-secret-key",
            "SECRET_KEY = '{s}'",
            r(LOWER + DIGITS + "!@#%^&*(-_=+)", 50).replace("'", "x"),
        ),
        ("client-secret-assignment", "client_secret={s}", mixed(32)),
        ("mailgun", "MAILGUN_API_KEY={s}", "key-" + r(HEX, 32)),
        ("mailchimp", "mailchimp_key: {s}", r(HEX, 32) + "-us12"),
        ("databricks", "token {s}", "dapi" + r(HEX, 32)),
        (
            "atlassian",
            "JIRA_API_TOKEN={s}",
            "ATATT3xFfGF0" + r(URLSAFE, 180) + "=" + r(HEX.upper(), 8),
        ),
        ("square", "square {s}", "EAAA" + r(URLSAFE, 60)),
        ("doppler", "DOPPLER_TOKEN={s}", "dp.pt." + mixed(43)),
        ("linear", "linear {s}", "lin_api_" + mixed(40)),
        ("postman", "postman {s}", "PMAK-" + r(HEX, 24) + "-" + r(HEX, 34)),
        ("pulumi", "PULUMI_ACCESS_TOKEN={s}", "pul-" + r(HEX, 40)),
        ("grafana-service-account", "glsa {s}", "glsa_" + mixed(32) + "_" + r(HEX, 8)),
        ("new-relic-user-key", "NEW_RELIC_API_KEY={s}", "NRAK-" + r(UPPER + DIGITS, 27)),
        ("age-secret-key", "{s}", "AGE-SECRET-KEY-1" + r("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
        ("alibaba-access-key", "alibaba id {s}", "LTAI" + mixed(20)),
        ("planetscale", "pscale {s}", "pscale_tkn_" + mixed(43)),
        ("heroku-v2", "heroku {s}", "HRKU-AA" + r(URLSAFE, 58)),
        ("curl-user-password", "curl -u deploy:{s} https://x", mixed(14)),
        ("netrc-password", "machine api.example.org login me password {s}", mixed(16)),
        (
            "private-key-json-field",
            '{{"type": "service_account", "private_key": "{s}"}}',
            pem("").replace("\n", "\\n"),
        ),
        ("after-marker-residue", "token=[redacted:x]{s}", "supersecret" + mixed(8)),
    ]


def main() -> None:
    corpus = [
        {
            "format": name,
            "text": template.replace("{s}", secret).replace("{{", "{").replace("}}", "}"),
            "secret": secret,
        }
        for name, template, secret in rows()
    ]
    names = [row["format"] for row in corpus]
    assert len(names) == len(set(names)), "format names must be unique"
    out = Path(__file__).with_name("corpus.json")
    out.write_text(json.dumps({"seed": SEED, "formats": corpus}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(corpus)} formats -> {out}")


if __name__ == "__main__":
    main()
