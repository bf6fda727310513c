"""The masking rule (evaluator.redaction): secret-named parameters, URL passwords, free text,
action endpoints."""

from __future__ import annotations

import inspect

import pytest

from evaluator.redaction import (
    is_secret_name,
    mask_endpoint,
    redact_parameters,
    redact_value,
    scrub,
    secret_values,
    url_origin,
)
from rules_builtin import registry


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "db_password",
        "passwd",
        "PASSPHRASE",
        "api_key",
        "apikey",
        "AWS_SECRET_ACCESS_KEY",
        "SessionToken",
        "webhook_token",
        "credentials",
        "gcp_credential_file",
        "auth",
        "Authorization",
        "monkey",  # any name containing "key", as before
    ],
)
def test_secret_names_are_masked(name: str) -> None:
    """Names containing pass, secret, token, key, credential or auth (any case) are secret."""
    assert is_secret_name(name)
    assert redact_parameters({name: "hunter22"}) == {name: "***"}


@pytest.mark.parametrize(
    "name", ["threshold", "tensor_regex", "token_values", "token_thresholds_percent", "key_count"]
)
def test_ordinary_names_are_shown(name: str) -> None:
    """Names without those words, or ending in a data word (token_values), keep their value."""
    assert not is_secret_name(name)
    assert redact_parameters({name: "0.5"}) == {name: "0.5"}


def test_no_built_in_rule_parameter_is_masked() -> None:
    """No parameter of a built-in rule is taken for a secret."""
    names = {
        p
        for rule in registry.names()
        for p in list(inspect.signature(registry.lookup(rule).__init__).parameters)[2:]
    }
    assert sorted(n for n in names if is_secret_name(n)) == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("postgres://u:PW@h", "postgres://u:***@h"),
        (
            "postgresql://user:p%40ss@db.example.com:5432/x",
            "postgresql://user:***@db.example.com:5432/x",
        ),
        ("https://user:pa@ss@h/p?q=1", "https://user:***@h/p?q=1"),
        ("redis://:only-password@cache:6379/0", "redis://:***@cache:6379/0"),
        ("s3://bucket/key:with@colon", "s3://bucket/key:with@colon"),  # no user:password
        ("https://h:8080/path", "https://h:8080/path"),
        ("plain text", "plain text"),
    ],
)
def test_url_passwords_are_masked(value: str, shown: str) -> None:
    """A URL's password, and only it, is masked in any value."""
    assert redact_value(value) == shown
    assert redact_parameters({"db_url": value}) == {"db_url": shown}


def test_redact_parameters_keeps_non_strings() -> None:
    """A value that is not a string (a default of None) stays as it is."""
    assert redact_parameters({"threshold": None, "token": None}) == {  # type: ignore[dict-item]
        "threshold": None,
        "token": "***",
    }


def test_scrub_hides_secret_values_in_free_text() -> None:
    """An exception message quoting a secret, as is or as repr shows it, loses it."""
    secrets = secret_values(
        {"password": "s3cr\\et!", "api_key": "AKIA123", "db_url": "postgres://u:PWPW@h", "n": "1"}
    )
    assert secrets == {"s3cr\\et!", "AKIA123", "PWPW"}
    text = "bad: 's3cr\\\\et!' AKIA123 PWPW postgres://u:PWPW@h threshold 1"
    assert scrub(text, secrets) == "bad: '***' *** *** postgres://u:***@h threshold 1"


def test_short_secrets_are_not_scrubbed_from_text() -> None:
    """Values under four characters would mask ordinary words: they are only masked by name."""
    assert secret_values({"password": "ab"}) == frozenset()


@pytest.mark.parametrize(
    ("endpoint", "shown"),
    [
        ("alice@example.com", "a***@example.com"),
        ("+15551234589", "+1***89"),
        ("12345", "***"),
        (15551234589, "15***89"),
    ],
)
def test_mask_endpoint(endpoint: object, shown: str) -> None:
    """E-mail addresses keep their first letter and domain; phone numbers two digits each end."""
    assert mask_endpoint(endpoint) == shown


def test_url_query_and_webhook_path_secrets_are_masked() -> None:
    """?token=, presigned-URL signatures and generated webhook path segments are masked; S3
    URIs and plain paths keep their names."""
    assert redact_value("https://x.io/h?a=1&token=abcdef") == "https://x.io/h?a=1&token=***"
    signed = redact_value("https://b.s3.amazonaws.com/k?X-Amz-Signature=beef&X-Amz-Credential=AK")
    assert "beef" not in signed and "AK" not in signed
    hook = "https://hooks.slack.com/services/T0000/B0000/Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
    assert redact_value(hook) == "https://hooks.slack.com/services/T0000/B0000/***"
    uri = "s3://bucket/job-2024-05-01-12-00-00-123456/debug-output"
    assert redact_value(uri) == uri
    assert redact_parameters({"webhook_url": hook}) == {"webhook_url": "***"}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/Xy7SeCrEt", "https://hooks.slack.com"),
        ("http://user:pw@127.0.0.1:8080/hook?token=abc", "http://127.0.0.1"),
        ("hooks.slack.com/services/T0/B0/Xy7SeCrEt", "a text of 40 characters"),
        ("http://[::1/x", "a text of 13 characters"),  # urlsplit raises on the host
    ],
)
def test_url_origin_shows_the_scheme_and_host_only(url: str, shown: str) -> None:
    assert url_origin(url) == shown
