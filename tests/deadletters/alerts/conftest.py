import pytest

from tests import channel_fakes

CONSOLE = "https://console.example.invalid"


@pytest.fixture
def channels(settings):
    """Factory: channels(feishu=dict(...), slack=dict(...), ...) starts one fake service per
    entry and points ALERT_CHANNELS at them (named after their type). Returns {type: fake}."""
    started = []

    def start(routes: dict | None = None, **specs):
        fakes, config = {}, []
        for kind, options in specs.items():
            options = dict(options or {})
            entry = {"name": kind, "type": kind, "timeout": 1.0, **options.pop("channel", {})}
            entry.update((routes or {}).get(kind, {}))
            if kind == "email":
                fake = channel_fakes.FakeSMTP()
                settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
                settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", fake.port
                settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
                settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
                entry.setdefault("to", ["oncall@example.com"])
            else:
                fake = {
                    "feishu": channel_fakes.FakeFeishu,
                    "wecom": channel_fakes.FakeWeCom,
                    "slack": channel_fakes.FakeSlack,
                    "webhook": channel_fakes.FakeWebhook,
                }[kind](**options)
                entry["url"] = fake.url
                if kind in ("feishu", "webhook") and getattr(fake, "secret", ""):
                    entry["secret"] = fake.secret
            started.append(fake)
            fakes[kind] = fake
            config.append(entry)
        settings.ALERT_CHANNELS = config
        settings.CONSOLE_BASE_URL = CONSOLE
        return fakes

    yield start
    for fake in started:
        fake.stop()


@pytest.fixture(autouse=True)
def english_alerts(settings):
    """These tests read the words of English alerts unless they set ALERT_LANGUAGE themselves."""
    settings.ALERT_LANGUAGE = "en"
