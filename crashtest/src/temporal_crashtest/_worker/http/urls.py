"""What of a request's URL may be written (a report, a log, an effect's name): its method, host
and path, every id or token in them masked as `:id`, so that runs compare (ids differ per run)
and a token in a URL (a bot's, a webhook's, a session's) is written nowhere. No query.

A path segment's parameters (`;jsessionid=...`) and a `name=value` segment's value are masked
whatever they hold; a segment (percent-decoded) or a host label is masked when it is 8 or more
characters with 3 digits or more, or mixing upper case, lower case and digits; 24 or more; 12 or
more with `+`, `/`, `=` or `%` (base64, an encoded token); or begins as well-known secrets do
(`sk-`, `ghp_`, `xoxb-`, ...). A base64 token holds `/`, so a path splits it over segments: a
masked segment that could be base64 masks its neighbours in base64's alphabet too, up to a plain
word (`/t/UGFzc3dk/S2V5+MTIzNA==/slot` is `/t/:id/:id/slot`). `httpx2-async`, `completions`,
`sendMessage`, `api.openai.com` and `127.0.0.1` stay. Standard library only.
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote, urlsplit

MASK = ":id"
_ID_LIKE = re.compile(
    r"^(?:(?=(?:\D*\d){3}).{8,}|.{24,}|(?=.*[+/=%]).{12,}"
    r"|(?=.*[a-z])(?=.*[A-Z])(?=.*\d).{8,}"
    r"|(?:sk|pk|rk|whsec|ghp|gho|ghs|ghu|github_pat|glpat|xox[abpr]|AKIA|AIza|ya29)[-_.].*"
    r"|AKIA.{12,}|AIza.{12,})$"
)
_BASE64 = re.compile(r"^[A-Za-z0-9+/=_-]+$")  # base64's alphabets (standard and URL-safe)
# A path's own word: lower-case letters (with `-`, `_`, `.` between), or a version (`v2`).
_PLAIN = re.compile(r"^(?:[a-z]+(?:[-_.][a-z]+)*|v[0-9]{1,3})$")


def target_of(url: str) -> str:
    """`host[:port]/path` of `url`, masked (no scheme, no query, no user or password)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    with contextlib.suppress(ValueError):  # a port out of range: no port
        if parts.port is not None:
            netloc += f":{parts.port}"
    return f"{masked_host(netloc)}{masked_path(parts.path or '/')}"


def masked_path(path: str) -> str:
    """The path with every id- or token-like segment, parameter and value masked."""
    segments = path.split("/")
    masked = [_masked_segment(s) for s in segments]
    for i, segment in enumerate(segments):
        if masked[i] == MASK and _base64(segment):
            for step in (-1, 1):  # the rest of a token that held a `/`
                j = i + step
                while 0 <= j < len(segments) and _base64(segments[j]):
                    if _PLAIN.match(segments[j]):
                        break
                    masked[j] = MASK
                    j += step
    return "/".join(masked) or "/"


def _base64(segment: str) -> bool:
    decoded = unquote(segment)
    return bool(decoded) and _BASE64.match(decoded) is not None


def _masked_segment(segment: str) -> str:
    name, parameters = segment.partition(";")[::2]
    if parameters:  # `/cart;jsessionid=...`: a path parameter holds a session, a token
        return f"{_masked_segment(name)};{MASK}"
    if _ID_LIKE.match(name) or _ID_LIKE.match(unquote(name)):
        return MASK
    if "=" in name:  # `/key=...`: a value named in the path
        return f"{name.partition('=')[0]}={MASK}"
    return name


def masked_host(host: str) -> str:
    """The host name with every id- or token-like label masked (`<token>.hooks.example`)."""
    return ".".join(MASK if _ID_LIKE.match(label) else label for label in host.split("."))
