"""Secrets out of every line, in-process: Postgres URLs and connection strings in every form libpq
takes, URL userinfo, Bearer tokens, and the configured secrets themselves."""

from __future__ import annotations

import pytest

from infra.redaction import redact

ENV = {
    "MODEL_API_KEY": "sk-model-sentinel",
    "GROCER_API_KEYS": "household=grocer-sentinel-1,stranger=grocer-sentinel-2",
    "DATABASE_URL": "postgresql://agent:db-sentinel@db/grocery",
    "KEY_STRATEGY": "workflow",  # not a secret: its name only begins with KEY
    "GROCER_KEY_TTL_S": "86400",
}


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("postgresql://u:secret1@h:5432/d", "secret1", "postgresql://u:***@h:5432/d"),
        ("postgresql://u:pa@ss@h/d", "pa@ss", "postgresql://u:***@h/d"),
        ("postgresql://u@h/d?password=secret2&sslmode=require", "secret2", "sslmode=require"),
        ("host=h user=u password=secret3 dbname=d", "secret3", "dbname=d"),
        ("host=h password='se cret4' dbname=d", "se cret4", "dbname=d"),
        ("PASSWORD = secret5", "secret5", "PASSWORD = ***"),
        ("https://user:secret6@api.example.com/v1", "secret6", "https://user:***@api.example.com"),
        ("Authorization: Bearer abc.def-secret7", "abc.def-secret7", "Authorization: Bearer ***"),
        ("Authorization: Basic dTpzZWNyZXQ4", "dTpzZWNyZXQ4", "Authorization: Basic ***"),
        ("the provider said: Invalid key sk-model-sentinel", "sk-model-sentinel", "Invalid key"),
        ("keys grocer-sentinel-2 and db-sentinel", "sentinel", "keys *** and ***"),
    ],
)
def test_every_form_of_a_secret_is_hidden(text: str, hidden: str, kept: str) -> None:
    out = redact(text, ENV)
    assert hidden not in out and kept in out, out


def test_ordinary_words_stay() -> None:
    text = "KEY_STRATEGY=workflow, keys live 86400 s, user grocery at db"
    assert redact(text, ENV) == text
