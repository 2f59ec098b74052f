"""Settings of the console's sign-in and transport security, read from the environment (a part of
config.settings, which imports everything here)."""

from datetime import timedelta

from config.env import env_bool, env_int, env_str

LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
LOGOUT_REDIRECT_URL = "/console/login/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Login throttle (django-axes, config/login_throttle.py), console and admin alike: AXES_FAILURE_LIMIT
# failed logins for one username from one address, or AXES_ADDRESS_FAILURE_LIMIT from one address,
# within the cool-off lock that pair (or address), right password included, for AXES_COOLOFF_MINUTES
# after the failure that locked it. Never a username from everywhere; tries while locked do not
# extend it; a success does not wipe the count (or one's own account would reset the count of the
# address guessing another's). `manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS` unlock.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_HANDLER = "config.login_throttle.PairAndAddressHandler"
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_ADDRESS_FAILURE_LIMIT = env_int("AXES_ADDRESS_FAILURE_LIMIT", 20, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_RESET_ON_SUCCESS = False
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# The client address the audit log records too (REMOTE_ADDR, or what a trusted proxy appended).
AXES_CLIENT_IP_CALLABLE = "deadletters.audit.client_ip"
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
SESSION_COOKIE_HTTPONLY = True
# A session ends after this long without a request, and this long after sign-in whatever happens.
SESSION_IDLE_TIMEOUT = env_int("SESSION_IDLE_TIMEOUT", 8 * 3600, minimum=60)
SESSION_ABSOLUTE_TIMEOUT = env_int("SESSION_ABSOLUTE_TIMEOUT", 24 * 3600, minimum=60)
SESSION_COOKIE_AGE = SESSION_ABSOLUTE_TIMEOUT
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", SESSION_COOKIE_SECURE)

# HTTPS in production (README, "Security"): off by default so http://127.0.0.1:8000 keeps working.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)


def _proxy_ssl_header(raw: str) -> tuple[str, str] | None:
    """"X-Forwarded-Proto=https" -> ("HTTP_X_FORWARDED_PROTO", "https"): the header a TLS-terminating
    proxy sets (and strips from clients), so requests it forwarded count as HTTPS and SSL redirect
    does not loop."""
    from django.core.exceptions import ImproperlyConfigured

    if not raw:
        return None
    header, sep, value = (part.strip() for part in raw.partition("="))
    if not sep or not header or not value:
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER must look like 'X-Forwarded-Proto=https', got {raw!r}")
    name = header.upper().replace("-", "_")
    return (name if name.startswith("HTTP_") else f"HTTP_{name}", value)


SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(env_str("SECURE_PROXY_SSL_HEADER"))
