"""Secrets never stored: the detector (``smriti.secrets``), the policy, and the log scrub.

Every credential here is generated (``smriti.testing.fake_secrets``): random, with the
real format, never a real secret.
"""

from __future__ import annotations

import io
import json
import random

import pytest
import structlog

from smriti import secrets
from smriti.errors import InvalidInput
from smriti.logs import configure_logging, get_logger
from smriti.testing.fake_secrets import GENERATORS, example, luhn_complete

KINDS = sorted(GENERATORS)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_found_and_redacted_whole(kind: str) -> None:
    rng = random.Random(f"test-{kind}")
    for _ in range(25):
        sentence, secret = example(kind, rng)
        text, found = secrets.redact(sentence)
        assert [f.kind for f in found] == [kind], sentence
        assert secret not in text and secrets.marker(kind) in text
        # nothing of the secret is left beside the marker either
        assert not any(part in text for part in (secret[:12], secret[-12:]) if len(part) == 12)


def test_findings_give_the_span_of_the_secret() -> None:
    rng = random.Random(1)
    _, key = example("github-token", rng)
    text = f"push with {key} today"
    (found,) = secrets.find(text)
    assert text[found.start : found.end] == key


ORDINARY = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "The secret: practice every day and never skip leg day.",
    "My password is stored in the vault, ask Sam for it.",
    "I passed the token exam and got a basic certificate.",
    "Password: remember to change it next week",  # one word: read as prose, not a value
    "Call me at 415-555-0132 or +44 20 7946 0958 after 6pm.",
    "Order 1234 5678 9012 345 arrived; ISBN 978-0-13-468599-1 is the new edition.",
    "We use sk-learn style pipelines and the task-oriented-dialogue dataset.",
    "See https://example.com:8080/path?q=1 and postgres://localhost:5432/app.",
    "The docs say postgres://user:password@localhost/db and redis://:***@cache.",
    "Set password: ${DB_PASSWORD} and api_key = <your-api-key> in the template.",
    "commit 3e0931e8a1b2c3d4e5f60718293a4b5c6d7e8f90, uuid 123e4567-e89b-12d3-a456-426614174000",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "The meeting is at 2023-05-08 13:56 UTC, room 4111.",
    "AKIA is a prefix; ghp_ tokens start like that; hf_ too.",
    "Bearer bonds were popular; the bearer of bad news left.",
    "tokens: 4096, max_tokens = 512, secret_sauce: ketchup",
    # code an agent may remember: no literal credential in it
    "password = getpass.getpass() and api_key = os.environ['OPENAI_API_KEY']",
    "def login(user: str, password: str) -> Token: token = tokenizer(text)",
    "secret_key = settings.SECRET_KEY; password: ${{ secrets.DB_PASSWORD }}",
    'db_password: Optional[str] = None, "password": "{{ vault_pw }}"',
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert secrets.find(text) == []
    assert secrets.redact(text) == (text, [])


def test_card_numbers_need_a_valid_luhn_digit_and_13_to_19_digits() -> None:
    rng = random.Random(5)
    assert secrets.find("card 4111 1111 1111 1111")[0].kind == "card-number"
    assert secrets.find("amex 3782-822463-10005") != []
    assert secrets.find("card 4111 1111 1111 1112") == []  # Luhn fails
    valid_12 = luhn_complete("4", 12, rng)
    valid_20 = luhn_complete("4", 20, rng)
    assert secrets.find(f"n {valid_12}") == [] and secrets.find(f"n {valid_20}") == []
    assert secrets.find("4111 1111-1111 1111") == []  # mixed separators: not one number


def test_keyword_assignments_name_their_kind() -> None:
    text = (
        'password: hunter22 DB_PASSWORD=s3cr3t! {"api_key": "a1b2c3d4e5f6"} client_secret=Zq8v_x9Lm'
    )
    kinds = [f.kind for f in secrets.find(text)]
    assert kinds == ["password", "password", "api-key", "secret"]


def test_a_pem_block_is_redacted_whole_even_unclosed() -> None:
    _, pem = example("private-key", random.Random(2))
    text, found = secrets.redact(f"key:\n{pem}\nthanks")
    assert text == "key:\n[redacted:private-key]\nthanks" and len(found) == 1
    cut = pem.rsplit("-----END", 1)[0]
    assert secrets.redact(f"key:\n{cut}")[0] == "key:\n[redacted:private-key]"


def test_url_keeps_everything_but_the_password() -> None:
    text, _ = secrets.redact("db is postgres://app:Xy7-q9Lm2z@db.internal:5432/main")
    assert text == "db is postgres://app:[redacted:url-password]@db.internal:5432/main"


def test_private_text_is_removed_case_insensitively_across_lines() -> None:
    text, n = secrets.strip_private("a <private>x</private> b <PRIVATE>y\nz</Private> c")
    assert (text, n) == ("a b c", 2)
    assert secrets.strip_private("keep <private>hide\nall of this") == ("keep", 1)


def test_screen_redacts_content_tags_and_source_and_reports_kinds_only() -> None:
    rng = random.Random(3)
    _, token = example("github-token", rng)
    _, key = example("aws-access-key", rng)
    done = secrets.screen("redact", f"token {token} <private>diary</private>", [key, "ci"], key)
    assert done.text == "token [redacted:github-token]"
    assert done.tags == ["[redacted:aws-access-key]", "ci"]
    assert done.source == "[redacted:aws-access-key]"
    assert done.hidden == [
        {"kind": "private", "count": 1},
        {"kind": "github-token", "count": 1},
        {"kind": "aws-access-key", "count": 2},
    ]
    assert token not in json.dumps(done.hidden)


def test_refuse_names_the_kinds_and_allow_keeps_them_but_not_private_text() -> None:
    _, card = example("card-number", random.Random(4))
    with pytest.raises(InvalidInput, match=r"card-number.*nothing was stored"):
        secrets.screen("refuse", f"pay with {card}")
    kept = secrets.screen("allow", f"pay with {card} <private>pin 1234</private>")
    assert kept.text == f"pay with {card}" and kept.hidden == [{"kind": "private", "count": 1}]
    with pytest.raises(InvalidInput, match="only <private> text"):
        secrets.screen("allow", "<private>all of it</private>")


def test_ignore_case_finds_secrets_in_lower_cased_cue_names() -> None:
    _, key = example("aws-access-key", random.Random(6))
    assert secrets.find(key.lower()) == []
    assert [f.kind for f in secrets.find(key.lower(), ignore_case=True)] == ["aws-access-key"]


def test_no_secret_reaches_a_log_line() -> None:
    rng = random.Random(7)
    made = [example(kind, rng) for kind in ("openai-key", "jwt", "url-password", "password")]
    fakes = [secret for _, secret in made]
    sink = io.StringIO()
    try:
        configure_logging("info", json=True)
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sink))
        log = get_logger("test")
        log.info(f"stored {fakes[0]}", content=f"jwt {fakes[1]}", nested={"url": made[2][0]})
        try:
            raise ValueError(f"password: {fakes[3]}")
        except ValueError:
            log.exception("failed")
    finally:
        structlog.reset_defaults()
    lines = sink.getvalue()
    assert "[redacted:openai-key]" in lines and "[redacted:jwt]" in lines
    assert "ValueError" in lines  # the traceback is there, without the secret
    for fake in fakes:
        assert fake not in lines


def test_a_rejected_tag_is_not_echoed_with_its_secret() -> None:
    from smriti import validation

    _, token = example("jwt", random.Random(8))
    with pytest.raises(InvalidInput) as raised:
        validation.tags(["ops", token])
    assert "[redacted:jwt]" in str(raised.value) and token[:12] not in str(raised.value)
