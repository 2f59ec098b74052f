"""Settings of the alerts, read from the environment (a part of config.settings, which imports
everything here)."""

from config.env import env_bool, env_choice, env_float, env_float_list, env_int, env_list, env_str
from config.languages import LANGUAGES

# Unset DINGTALK_WEBHOOK: alerts are recorded as "skipped" and nothing is sent.
# The webhook URL carries the robot's access_token and is never logged or stored.
DINGTALK_WEBHOOK = env_str("DINGTALK_WEBHOOK", "").strip()
DINGTALK_SECRET = env_str("DINGTALK_SECRET", "").strip()  # "加签" secret (SEC...), optional
DINGTALK_KEYWORD = env_str("DINGTALK_KEYWORD", "").strip()  # "自定义关键词", optional
DINGTALK_AT_MOBILES = env_list("DINGTALK_AT_MOBILES", "")
DINGTALK_RATE_PER_MINUTE = env_int("DINGTALK_RATE_PER_MINUTE", 20, minimum=1)
DINGTALK_TIMEOUT = env_float("DINGTALK_TIMEOUT", 5.0, minimum=0.1)
DINGTALK_MAX_SEND_ATTEMPTS = env_int("DINGTALK_MAX_SEND_ATTEMPTS", 10, minimum=1)
DINGTALK_RETRY_BACKOFF = env_float_list("DINGTALK_RETRY_BACKOFF", "10,30,60,120,300,600")
DINGTALK_THROTTLE_BACKOFF_SECONDS = env_int("DINGTALK_THROTTLE_BACKOFF_SECONDS", 600, minimum=1)
DINGTALK_CONFIG_ERROR_PAUSE_SECONDS = env_int("DINGTALK_CONFIG_ERROR_PAUSE_SECONDS", 600, minimum=1)
DINGTALK_WRAP_LINKS = env_bool("DINGTALK_WRAP_LINKS", False)
DINGTALK_DIGEST_MAX_GROUPS = env_int("DINGTALK_DIGEST_MAX_GROUPS", 10, minimum=1)
# The language of the DingTalk alerts' text (one language per message), whoever reads the console.
ALERT_LANGUAGE = env_choice("ALERT_LANGUAGE", "zh-hans", choices=[code for code, _ in LANGUAGES])
# The team's time zone: every time in an alert and on a console page is shown in it, with its name.
TIME_ZONE = env_str("TIME_ZONE", "Asia/Shanghai" if ALERT_LANGUAGE.startswith("zh") else "UTC")
# Other channels (Feishu/Lark, WeCom, Slack, signed webhook, email) with routing rules: a JSON list,
# see deadletters/alerts/channels/config.py. Email goes through Django's EMAIL_* settings below.
ALERT_CHANNELS = env_str("ALERT_CHANNELS", "[]")
ALERT_RESOLVED_AFTER_SECONDS = env_int("ALERT_RESOLVED_AFTER_SECONDS", 1800, minimum=1)
RELEASE_NAME = env_str("RELEASE_NAME", "").strip()[:100]
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "report-console@localhost")
