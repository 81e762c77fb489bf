"""Secrets out of every line we write: error lines, log records, and the failures an activity
leaves in the durable Temporal history.

`redact(text)` hides: passwords in Postgres URLs and connection strings in every form libpq
takes (`user:pass@`, with an unencoded `@` or `/` in the password too; `?password=`,
`?sslpassword=`; `password=` and `sslpassword=` keywords, quoted or not), any URL's userinfo,
secrets in any URL's query string (`api-key`, `api_key`, `key`, `token`, `access_token`,
`secret`, `sig`, ...), `Bearer` and `Basic` credentials, and the values of the secrets
configured in this process's environment (every variable whose name ends in _KEY, _KEYS,
PASSWORD, _PWD, TOKEN or SECRET, and the passwords and query-string secrets inside DATABASE_URL,
MODEL_BASE_URL and GROCER_URL), wherever they appear, echoed by a provider or a model or not.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Mapping
from urllib.parse import unquote

HIDDEN = "***"
SECRET_NAME = re.compile(r"(?:_KEY|_KEYS|PASSWORD|_PWD|TOKEN|SECRET)$", re.IGNORECASE)
URLS_WITH_SECRETS = ("DATABASE_URL", "MODEL_BASE_URL", "GROCER_URL")
MIN_SECRET_CHARS = 4  # shorter values would hide ordinary words
# scheme://user:password@ — the password runs to the last @ of the URL (it may hold an unencoded
# `@` or `/`).
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)\S*@", re.IGNORECASE)
_PASSWORD_PARAM = re.compile(
    r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]+)", re.IGNORECASE
)
_QUERY_SECRET = re.compile(
    r"([?&;](?:api[-_]?key|key|token|access[-_]?token|auth|secret|client[-_]?secret|sig|"
    r"signature|passwd|pwd)=)[^&#\s]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The configured secrets, longest first (so that a longer one is hidden whole)."""
    env = os.environ if env is None else env
    found: set[str] = set()
    for name, value in env.items():
        if SECRET_NAME.search(name):
            # GROCER_API_KEYS=ACCOUNT=KEY,...: each key, and the whole value
            parts = [value, *(p.partition("=")[2] for p in value.split(",") if "=" in p)]
            found.update(p for p in parts if len(p) >= MIN_SECRET_CHARS)
    for name in URLS_WITH_SECRETS:
        value = env.get(name, "")
        userinfo = _USERINFO.match(value)
        password = userinfo.group(0)[len(userinfo.group(1)) : -1] if userinfo else ""
        candidates = [password, unquote(password)]
        candidates += [m.group(2).strip("'") for m in _PASSWORD_PARAM.finditer(value)]
        candidates += [m.group(0)[len(m.group(1)) :] for m in _QUERY_SECRET.finditer(value)]
        for candidate in candidates:
            for form in (candidate, unquote(candidate)):
                if len(form) >= MIN_SECRET_CHARS:
                    found.add(form)
    return sorted(found, key=len, reverse=True)


@functools.cache
def _configured_secrets() -> tuple[str, ...]:
    """This process's secrets, read once: every log record is redacted, and the environment does
    not change after start."""
    return tuple(secret_values())


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` with its secrets hidden; `env`: whose secrets (default: this process's)."""
    for secret in _configured_secrets() if env is None else secret_values(env):
        text = text.replace(secret, HIDDEN)
    text = _USERINFO.sub(rf"\1{HIDDEN}@", text)
    text = _PASSWORD_PARAM.sub(rf"\1{HIDDEN}", text)
    text = _QUERY_SECRET.sub(rf"\1{HIDDEN}", text)
    return _BEARER.sub(rf"\1{HIDDEN}", text)


class RedactSecrets(logging.Filter):
    """A handler filter: the record's message (and exception text) with its secrets hidden."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        hidden = redact(message)
        if hidden != message:
            record.msg, record.args = hidden, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
