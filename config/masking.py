"""Secrets inside URLs, hidden for logs, pages and error reports (no Django import: settings use it).

DATABASE_URL and REDIS_URL carry a password in the netloc (a Sentinel URL also a
`sentinel_password` in the query); DINGTALK_WEBHOOK carries the robot's access_token.
"""

import re

MASK = "********************"
_NETLOC_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.\-]*://[^:@/\s]*:)[^@/\s]+(?=@)", re.I)
_SECRET_QUERY = re.compile(
    r"(?P<head>[?&](?:access_token|token|sign|secret|[a-z_]*password|passwd|api_key|key)=)[^&#\s]+", re.I
)


def mask_url_secrets(text: str) -> str:
    """`text` with URL passwords (scheme://user:PASSWORD@host) and secret query values hidden."""
    text = _NETLOC_PASSWORD.sub(lambda m: m["head"] + MASK, text)
    return _SECRET_QUERY.sub(lambda m: m["head"] + MASK, text)
