"""Who may use the grocer: every request carries an account's secret key
(`Authorization: Bearer KEY`), and what it stores and finds belongs to that account.

GROCER_API_KEYS holds the accounts, `ACCOUNT=KEY,ACCOUNT=KEY` (GROCER_API_KEY alone: one account,
`default`). Keys are compared in constant time, and every key is compared, so the time taken
does not say which account a guess came close to.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping

from infra.config import PLACEHOLDER
from infra.errors import ConfigError

DEFAULT_ACCOUNT = "default"
MIN_KEY_CHARS = 16
_ACCOUNT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_KEY = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no spaces
BEARER = "Bearer "


def _checked_key(key: str, where: str) -> bytes:
    if not _KEY.fullmatch(key) or "," in key:
        raise ConfigError(f"{where}: a key is printable ASCII without spaces or commas")
    if key.startswith(PLACEHOLDER):
        raise ConfigError(f"{where}: the key is .env.example's placeholder: set your own")
    if len(key) < MIN_KEY_CHARS:
        raise ConfigError(
            f"{where}: a key of {len(key)} characters is too easy to guess; "
            f"use at least {MIN_KEY_CHARS}"
        )
    return key.encode()


class Accounts:
    def __init__(self, keys: Mapping[str, str]) -> None:
        if not keys:
            raise ConfigError(
                "the grocer needs at least one account: set GROCER_API_KEY (the secret every "
                "request must carry) or GROCER_API_KEYS=ACCOUNT=KEY,..."
            )
        seen: set[bytes] = set()
        self._keys: list[tuple[str, bytes]] = []
        for account, key in keys.items():
            if not _ACCOUNT.fullmatch(account):
                raise ConfigError(
                    f"GROCER_API_KEYS: {account!r} is not an account name "
                    "(lowercase letters, digits, - and _)"
                )
            secret = _checked_key(key, f"GROCER_API_KEYS ({account})")
            if secret in seen:
                raise ConfigError(f"GROCER_API_KEYS: account {account} shares another's key")
            seen.add(secret)
            self._keys.append((account, secret))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Accounts:
        many = env.get("GROCER_API_KEYS", "").strip()
        if many:
            keys: dict[str, str] = {}
            for part in many.split(","):
                account, sep, key = part.strip().partition("=")
                if not sep:
                    raise ConfigError("GROCER_API_KEYS: expected ACCOUNT=KEY,ACCOUNT=KEY")
                if account in keys:
                    raise ConfigError(f"GROCER_API_KEYS: account {account} is given twice")
                keys[account] = key
            return cls(keys)
        one = env.get("GROCER_API_KEY", "").strip()
        return cls({DEFAULT_ACCOUNT: one} if one else {})

    def account_for(self, authorization: str | None) -> str | None:
        """The account whose key the header carries (None: no such key)."""
        if not authorization or not authorization.startswith(BEARER):
            return None
        given = authorization[len(BEARER) :].strip().encode(errors="replace")
        found = None
        for account, secret in self._keys:
            if hmac.compare_digest(given, secret):
                found = account
        return found
