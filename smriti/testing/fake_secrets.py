"""Realistic fake credentials, one generator per kind ``smriti.secrets`` detects.

Each is random but has the real format (prefix, length, alphabet, checksum), so tests
and ``bench/secret_scan.py`` can check detection without a real secret anywhere.
``example(kind, rng)`` returns ``(sentence, secret)``: the secret embedded in a sentence
of the kind people paste into a conversation.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
UPPER_DIGITS = string.ascii_uppercase + string.digits


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet`` with at least one digit, upper and lower letter
    when the alphabet has them (a real key almost always does)."""
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        wanted = [set(string.digits), set(string.ascii_uppercase), set(string.ascii_lowercase)]
        if all(not (w & set(alphabet)) or w & set(out) for w in wanted):
            return out


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    """A ``length``-digit number starting with ``prefix`` whose Luhn check digit is valid."""
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        total += (d * 2 - 9 if d > 4 else d * 2) if i % 2 == 0 else d
    return body + str((10 - total % 10) % 10)


def _card(rng: random.Random) -> str:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15),
                                 ("37", 15), ("6011", 16), ("35", 16), ("4", 19)])  # fmt: skip
    number = luhn_complete(prefix, length, rng)
    sep = rng.choice(["", " ", "-"])
    if not sep:
        return number
    if length == 15:
        return sep.join([number[:4], number[4:10], number[10:]])
    return sep.join(number[i : i + 4] for i in range(0, length, 4))


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    claims = {"sub": str(rng.randrange(10**9)), "iat": rng.randrange(1_600_000_000, 1_800_000_000)}
    payload = _b64url(json.dumps(claims).encode())
    return f"{header}.{payload}.{_b64url(rng.randbytes(32))}"


def _pem(rng: random.Random) -> str:
    label = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    body = base64.b64encode(rng.randbytes(rng.choice([48, 120, 300]))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def _url(rng: random.Random) -> tuple[str, str]:
    scheme = rng.choice(["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp",
                         "https"])  # fmt: skip
    user = rng.choice(["app", "admin", "svc_report", "deploy"])
    password = _draw(rng, ALNUM + "!*-_~", rng.randrange(12, 24))
    host = rng.choice(["db.internal", "10.0.3.7", "cluster0.ab1cd.mongodb.net", "mq.example.org"])
    return f"{scheme}://{user}:{password}@{host}:{rng.randrange(1000, 9999)}/main", password


def _azure(rng: random.Random) -> tuple[str, str]:
    key = base64.b64encode(rng.randbytes(64)).decode()
    text = (
        f"DefaultEndpointsProtocol=https;AccountName=store{rng.randrange(1000)};"
        f"AccountKey={key};EndpointSuffix=core.windows.net"
    )
    return text, key


#: kind -> (generator, sentence templates with ``{}`` for what it makes). A generator
#: returns the credential, or (the text it appears in, the credential) when only part
#: of that text is secret (a URL's password, a connection string's key).
Generator = Callable[[random.Random], str | tuple[str, str]]
GENERATORS: dict[str, tuple[Generator, tuple[str, ...]]] = {
    "aws-access-key": (
        lambda r: rng_choice(r, ["AKIA", "ASIA"]) + _draw(r, string.ascii_uppercase + "234567", 16),
        ("The deploy user's access key id is {} in us-east-1.", "export AWS_ACCESS_KEY_ID={}"),
    ),
    "aws-secret-key": (
        lambda r: _draw(r, B64, 40),
        ("aws_secret_access_key = {}", "Our AWS secret access key is {} (rotate it in May)."),
    ),
    "github-token": (
        lambda r: (
            rng_choice(r, ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _draw(r, ALNUM, 36)
            if r.random() < 0.7
            else f"github_pat_{_draw(r, ALNUM, 22)}_{_draw(r, ALNUM, 59)}"
        ),
        ("Use the token {} to push to the repo.", "GITHUB_TOKEN={} for the CI runner"),
    ),
    "anthropic-key": (
        lambda r: f"sk-ant-api03-{_draw(r, URLSAFE, 93)}AA",
        ("My Anthropic key: {}", "set ANTHROPIC_API_KEY to {} before running"),
    ),
    "openai-key": (
        lambda r: (
            f"sk-proj-{_draw(r, URLSAFE, 156)}"
            if r.random() < 0.5
            else f"sk-{_draw(r, ALNUM, 20)}T3BlbkFJ{_draw(r, ALNUM, 20)}"
        ),
        ("The OpenAI key is {} - keep it out of git.", "OPENAI_API_KEY={}"),
    ),
    "slack-token": (
        lambda r: (
            f"{rng_choice(r, ['xoxb', 'xoxp'])}-{r.randrange(10**11, 10**12)}-"
            f"{r.randrange(10**12, 10**13)}-{_draw(r, ALNUM, 24)}"
        ),
        ("The Slack bot token is {}", "slack: {} for the alerts app"),
    ),
    "slack-webhook": (
        lambda r: (
            f"https://hooks.slack.com/services/T{_draw(r, UPPER_DIGITS, 8)}"
            f"/B{_draw(r, UPPER_DIGITS, 10)}/{_draw(r, ALNUM, 24)}"
        ),
        ("Post build alerts to {} please.", "webhook: {}"),
    ),
    "stripe-key": (
        lambda r: (
            f"{rng_choice(r, ['sk', 'rk'])}_{rng_choice(r, ['live', 'test'])}_{_draw(r, ALNUM, 24)}"
        ),
        ("Stripe secret key {} is for the shop.", "STRIPE_KEY={}"),
    ),
    "google-api-key": (
        lambda r: "AIza" + _draw(r, URLSAFE, 35),
        ("The Maps API key is {}.", "google key: {}"),
    ),
    "gitlab-token": (
        lambda r: "glpat-" + _draw(r, URLSAFE, 20),
        ("GitLab personal access token {} expires in June.", "use {} for the registry"),
    ),
    "smriti-api-key": (
        lambda r: f"smriti_{r.randbytes(6).hex()}_{_b64url(r.randbytes(32))}",
        ("The team server key is {}", "SMRITI_API_KEY={} for the laptop client"),
    ),
    "npm-token": (
        lambda r: "npm_" + _draw(r, ALNUM, 36),
        ("//registry.npmjs.org/:_authToken={}", "npm publish token: {}"),
    ),
    "pypi-token": (
        lambda r: "pypi-AgEIcHlwaS5vcmc" + _draw(r, URLSAFE, 140),
        ("Upload with twine using {} as the password.", "PyPI token {}"),
    ),
    "huggingface-token": (
        lambda r: "hf_" + _draw(r, string.ascii_letters, 34),
        ("My Hugging Face token is {}.", "HF_TOKEN={}"),
    ),
    "jwt": (_jwt, ("The session cookie was {} yesterday.", "id_token: {}")),
    "private-key": (_pem, ("Here is the deploy key:\n{}\nput it in ~/.ssh.", "{}")),
    "url-password": (
        _url,
        ("The staging database is {} if you need it.", "DATABASE_URL={}"),
    ),
    "password": (
        lambda r: _draw(r, ALNUM + "!#%*", r.randrange(10, 18)),
        (
            "wifi password: {}",
            "DB_PASSWORD={}",
            '{{"user": "admin", "password": "{}"}}',
            "The router passwd={} for the guest network.",
            "My password is {} for the NAS.",
        ),
    ),  # fmt: skip
    "api-key": (
        lambda r: _draw(r, string.hexdigits.lower(), 32),
        ("api_key = {}", "The weather service apiKey: {}"),
    ),
    "secret": (
        lambda r: _draw(r, URLSAFE, 40),
        ("client_secret: {}", "SECRET_KEY={} in settings.py"),
    ),
    "azure-storage-key": (_azure, ("Connection string: {}", "AZURE_STORAGE_CONNECTION_STRING={}")),
    "bearer-token": (
        lambda r: _draw(r, URLSAFE + ".~", 48),
        ("curl -H 'Authorization: Bearer {}' https://api.example.com", "Bearer {}"),
    ),
    "card-number": (
        _card,
        ("My card number is {}, expiry 04/29.", "Pay with {} please"),
    ),
}


def rng_choice(rng: random.Random, options: list[str]) -> str:
    """``rng.choice`` (named, so that the generator lambdas stay one expression)."""
    return rng.choice(options)


def example(kind: str, rng: random.Random) -> tuple[str, str]:
    """A sentence holding one fake credential of ``kind``, and the credential."""
    make, templates = GENERATORS[kind]
    made = make(rng)
    text, secret = made if isinstance(made, tuple) else (made, made)
    return rng.choice(templates).format(text), secret
