"""Group deaths by cause: the error type plus its message with the variable parts taken out."""

import hashlib
import re

_PATTERNS = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I), "<uuid>"),
    (re.compile(r"https?://\S+"), "<url>"),
    (re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"), "<email>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def normalise_message(message: str) -> str:
    text = message[:2000]
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text.strip()[:500]


def fingerprint(error_type: str, message: str) -> str:
    return hashlib.sha1(f"{error_type}\n{normalise_message(message)}".encode()).hexdigest()
