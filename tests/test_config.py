"""The settings' parsers, in-process: every bad value is one ConfigError line, before anything
connects (docs/operations.md lists the settings)."""

from __future__ import annotations

import re

import pytest

from agent.data import Choice, OrderLine, PantryReport
from agent.guardrails import GuardrailViolation, check_choice
from agent.llm import model_from_env
from infra.config import (
    env_number,
    env_port,
    grocer_key_ttl_s,
    http_url,
    parse_choice,
    step_pause_seconds,
)
from infra.db import ensure_database_url
from infra.errors import ConfigError
from infra.grocer_server import ensure_grocer_url, grocer_api_key
from infra.logs import LogFormat, log_format
from infra.metrics import metrics_address
from infra.temporal_client import configured
from worker import KeyStrategy, key_strategy


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("nan", "is not a finite number"),
        ("inf", "is not a finite number"),
        ("-inf", "is not a finite number"),
        ("ten", "is not a number"),
        ("0", "must be more than 0"),
        ("-1", "must be more than 0"),
        (str(400 * 86400), "must be at least 0 and at most 31622400"),
    ],
)
def test_a_number_must_be_finite_and_in_range(
    monkeypatch: pytest.MonkeyPatch, raw: str, message: str
) -> None:
    monkeypatch.setenv("GROCER_KEY_TTL_S", raw)
    with pytest.raises(ConfigError, match=re.escape(f"GROCER_KEY_TTL_S='{raw}' {message}")):
        grocer_key_ttl_s()


def test_numbers_ports_and_blanks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_NUMBER", "  ")
    assert env_number("SOME_NUMBER", 7.0) == 7.0  # blank is unset
    monkeypatch.setenv("SOME_NUMBER", "2.5")
    assert env_number("SOME_NUMBER", 7.0, maximum=3) == 2.5
    for port in ("0", "65536", "http", "-1", "80.0"):
        monkeypatch.setenv("SOME_PORT", port)
        with pytest.raises(ConfigError, match="is not a TCP port"):
            env_port("SOME_PORT")
    monkeypatch.setenv("SOME_PORT", "9464")
    assert env_port("SOME_PORT") == 9464


def test_step_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEP_PAUSE_MS", "5-60")
    assert step_pause_seconds() == (0.005, 0.06)
    monkeypatch.setenv("STEP_PAUSE_MS", "100")
    assert step_pause_seconds() == (0.1, 0.1)
    for bad in ("60-5", "a-b", "-5", "0-inf", "nan", "0-60001"):
        monkeypatch.setenv("STEP_PAUSE_MS", bad)
        with pytest.raises(ConfigError, match="STEP_PAUSE_MS"):
            step_pause_seconds()


def test_choices_name_every_valid_value(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown LOG_FORMAT 'yaml'; valid: text, json"):
        parse_choice(LogFormat, "yaml", "LOG_FORMAT")
    monkeypatch.setenv("LOG_FORMAT", "json")
    assert log_format() is LogFormat.JSON
    monkeypatch.setenv("KEY_STRATEGY", "run")
    assert key_strategy() is KeyStrategy.RUN


@pytest.mark.parametrize("url", ["not a url", "ftp://host/x", "http://", "grocer:8300"])
def test_a_url_needs_http_and_a_host(url: str) -> None:
    with pytest.raises(ConfigError, match="is not an http\\(s\\) URL with a host"):
        http_url("GROCER_URL", url)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:99999", "http://127.0.0.1:\u0668\u0663\u0660\u0660", "http://h:0",
            "http://h:-1"],
)  # fmt: skip
def test_a_url_needs_a_valid_port(url: str) -> None:
    with pytest.raises(ConfigError, match="is not an http\\(s\\) URL with a valid port"):
        http_url("GROCER_URL", url)


def test_a_port_setting_takes_ascii_digits_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("\u0668\u0663\u0660\u0660", "99999", "0", "\uff18\uff13\uff10\uff10"):
        monkeypatch.setenv("METRICS_PORT", bad)
        with pytest.raises(ConfigError, match="is not a TCP port"):
            env_port("METRICS_PORT")


def test_the_grocer_url_takes_no_credentials_and_its_key_no_placeholder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GROCER_URL", "http://robot:hunter2@grocer.example.com")
    with pytest.raises(ConfigError, match="GROCER_URL carries credentials") as refused:
        ensure_grocer_url()
    assert "hunter2" not in str(refused.value)
    monkeypatch.setenv("GROCER_API_KEY", "change-me-grocer-key")
    with pytest.raises(ConfigError, match=r"GROCER_API_KEY is \.env\.example's placeholder"):
        grocer_api_key()


def test_a_temporal_api_key_is_not_sent_without_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.example.com:7233")
    monkeypatch.setenv("TEMPORAL_API_KEY", "tmprl-0123456789")
    monkeypatch.setenv("TEMPORAL_TLS", "false")
    with pytest.raises(ConfigError, match="TEMPORAL_API_KEY would go in clear to temporal"):
        configured()
    monkeypatch.setenv("TEMPORAL_ALLOW_PLAIN_API_KEY", "1")
    assert configured()["api_key"] == "tmprl-0123456789"
    monkeypatch.delenv("TEMPORAL_ALLOW_PLAIN_API_KEY")
    monkeypatch.delenv("TEMPORAL_TLS")  # unset: the SDK turns TLS on for a key
    assert configured()["api_key"] == "tmprl-0123456789"


def test_a_model_url_is_checked_and_its_key_kept_off_plain_http(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODEL", "openai")
    monkeypatch.setenv("MODEL_NAME", "m")
    monkeypatch.setenv("MODEL_BASE_URL", "http://robot:hunter2@models.example.com/v1")
    monkeypatch.setenv("MODEL_API_KEY", "sk-0123456789")
    with pytest.raises(ConfigError, match=r"would go in clear to models\.example\.com") as refused:
        model_from_env()
    assert "hunter2" not in str(refused.value)
    monkeypatch.setenv("MODEL_BASE_URL", "gopher://robot:hunter2@models.example.com")
    with pytest.raises(ConfigError, match="is not an http\\(s\\) URL") as refused:
        model_from_env()
    assert "hunter2" not in str(refused.value)
    monkeypatch.setenv("MODEL_BASE_URL", "https://models.example.com/v1")
    monkeypatch.setenv("MODEL_TIMEOUT_S", "0")
    with pytest.raises(ConfigError, match="MODEL_TIMEOUT_S='0' must be more than 0"):
        model_from_env()


def test_a_placeholder_password_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://agent:change-me-app-db@db/grocery")
    with pytest.raises(
        ConfigError, match=r"DATABASE_URL's password is \.env\.example's placeholder"
    ):
        ensure_database_url()


def test_metrics_on_an_ipv6_host_are_bracketed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICS_HOST", "::1")
    assert metrics_address(9464) == "[::1]:9464"
    monkeypatch.setenv("METRICS_HOST", "0.0.0.0")
    assert metrics_address(9464) == "0.0.0.0:9464"
    monkeypatch.setenv("METRICS_HOST", "metrics.example.com")
    with pytest.raises(ConfigError, match="is not an IP address"):
        metrics_address(9464)


PANTRY = PantryReport(have=["milk"], missing=["eggs", "rice", "cheese", "coffee", "truffles"])


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([("caviar", 1)], "the model chose 'caviar', which the pantry did not report missing"),
        ([("truffles", 1)], "the model chose 'truffles', which is not on the price list"),
        ([("milk", 1)], "the model chose 'milk', which the pantry did not report missing"),
        ([("eggs", 7)], "7 x 'eggs'; at most 6 of an item"),
        ([("eggs", 4), ("eggs", 3)], "7 x 'eggs'; at most 6 of an item"),  # summed over lines
        # A look-alike letter (Cyrillic i) is shown as its escape, never as the item it imitates.
        ([("m\u0456lk", 1)], "the model chose 'm\\u0456lk', which the pantry did not report"),
        ([("coffee", 5), ("cheese", 1)], "would cost 50.44, over the household's budget of 45.00"),
    ],
)
def test_a_guardrail_names_what_is_wrong(lines: list[tuple[str, int]], message: str) -> None:
    choice = Choice(lines=[OrderLine(item=i, quantity=q) for i, q in lines])
    with pytest.raises(GuardrailViolation, match=re.escape(message)):
        check_choice(PANTRY, choice)


def test_a_choice_within_the_guardrails_passes() -> None:
    check_choice(PANTRY, Choice(lines=[OrderLine(item="eggs", quantity=6),
                                       OrderLine(item="rice", quantity=2)]))  # fmt: skip


@pytest.mark.parametrize("name", ["GROCER_HEADER_TIMEOUT_S", "GROCER_BODY_TIMEOUT_S"])
@pytest.mark.parametrize("raw", ["1e-9", "0", "nan", "301"])
def test_the_grocers_timeouts_are_ones_a_request_can_meet(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    from grocer.listener import HttpLimits

    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError, match=re.escape(f"{name}='{raw}'")):
        HttpLimits.from_env()
