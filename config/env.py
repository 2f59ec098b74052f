"""Typed readers for environment variables, so a bad value fails at start-up with its name."""

import ipaddress
import os

from django.core.exceptions import ImproperlyConfigured


def _raw(name: str) -> str | None:
    """The variable's value, or None when it is unset or blank: `DATABASE_URL=` means the default."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    return value


def env_str(name: str, default: str = "") -> str:
    raw = _raw(name)
    return default if raw is None else raw


def env_bool(name: str, default: bool = False) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float_list(name: str, default: str) -> tuple[float, ...]:
    raw = _raw(name) or default
    try:
        values = tuple(float(part) for part in raw.split(",") if part.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be comma-separated seconds, got {raw!r}") from None
    if not values or any(v < 0 for v in values):
        raise ImproperlyConfigured(f"{name} needs at least one non-negative number, got {raw!r}")
    return values


def env_choice(name: str, default: str, *, choices: list[str]) -> str:
    """One of `choices`, compared without case ("zh-Hans" reads as "zh-hans")."""
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return value


def env_list(name: str, default: str) -> list[str]:
    raw = _raw(name) or default
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_networks(name: str, default: str) -> tuple:
    """Comma-separated addresses or networks (10.0.0.0/8, ::1) as ipaddress networks."""
    networks = []
    for part in env_list(name, default):
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name} must list IP addresses or networks, got {part!r}") from None
    return tuple(networks)


RATE_PERIODS = {
    **dict.fromkeys(("s", "sec", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}


def env_rate(name: str, default: str) -> tuple[int, int] | None:
    """`N/minute` (second, minute, hour, day; also s, min, h, d) as (N, seconds); `off` is None."""
    raw = (_raw(name) or default).strip().lower()
    if raw == "off":
        return None
    count, _, unit = (part.strip() for part in raw.partition("/"))
    period = RATE_PERIODS.get(unit)
    if not count.isdigit() or int(count) < 1 or period is None:
        raise ImproperlyConfigured(f"{name} must be like 600/minute (second, minute, hour, day) or off, "
                                   f"got {raw!r}")
    return int(count), period


def env_kind_map(name: str, *, choices=None, minimum: int | None = None) -> dict:
    """"kind=value,kind=value": values from `choices`, or integers >= `minimum`; a malformed entry
    fails start-up with its name."""
    result = {}
    for part in env_list(name, ""):
        kind, sep, value = (piece.strip() for piece in part.partition("="))
        try:
            if not sep or not kind:
                raise ValueError
            if choices is not None:
                if value not in choices:
                    raise ValueError
                result[kind] = value
            else:
                result[kind] = int(value)
                if minimum is not None and result[kind] < minimum:
                    raise ValueError
        except ValueError:
            raise ImproperlyConfigured(f"{name} must look like 'kind=value,kind=value', "
                                       f"got {part!r}") from None
    return result
