"""ALERT_CHANNELS parsing and routing: a mistake fails start-up with the channel's name, never
with its URL or secret; no part of a URL's secret, however short, survives in a text."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from deadletters.alerts.channels import Channel, configured_channels, parse_channels, routed_channels
from deadletters.alerts.wire import scrub

HOOK = "https://open.feishu.invalid/open-apis/bot/v2/hook/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def test_defaults_follow_each_services_documented_budget():
    feishu, wecom, slack, mail = parse_channels(
        [
            {"name": "f", "type": "feishu", "url": HOOK, "secret": "s"},
            {"name": "w", "type": "wecom", "url": "https://qyapi.invalid/cgi-bin/webhook/send?key=k"},
            {
                "name": "s",
                "type": "slack",
                "url": "https://hooks.slack.invalid/services/T/B/x",
                "events": ["digest"],
            },
            {"name": "m", "type": "email", "to": ["a@example.com"], "kinds": ["probe"]},
        ]
    )
    assert (feishu.rate_per_minute, feishu.rate_per_second) == (100, 5)
    assert (wecom.rate_per_minute, slack.rate_per_second, mail.rate_per_minute) == (20, 1, 30)
    assert slack.events == {"death", "test"}  # a digest is deaths, coalesced
    assert mail.takes(event="death", kind="probe") and not mail.takes(event="death", kind="http_export")
    assert HOOK not in repr(feishu) and "secret" not in repr(feishu).replace("secrets", "")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"name": "x"}', "a JSON list of channels"),
        ("[1]", "each channel is a JSON object"),
        ('[{"name": "Bad Name!", "type": "slack"}]', "channel name 'bad name!'"),
        ('[{"name": "dingtalk", "type": "slack", "url": "https://x.invalid"}]', "is taken"),
        ('[{"name": "a", "type": "pager"}]', "channel a: type must be one of"),
        ('[{"name": "a", "type": "dingtalk", "url": "https://x.invalid"}]', "DINGTALK_WEBHOOK"),
        ('[{"name": "a", "type": "slack", "url": "ftp://x"}]', "must be an http(s) URL"),
        ('[{"name": "a", "type": "webhook", "url": "https://x.invalid"}]', 'needs a "secret"'),
        ('[{"name": "a", "type": "email"}]', 'needs "to"'),
        ('[{"name": "a", "type": "email", "to": ["x@y"], "events": ["page"]}]', "unknown events ['page']"),
        ("not json", "ALERT_CHANNELS"),
        ('[{"name": "a", "type": "slack", "url": "https://x.invalid", "heartbeat_url": "ftp://hc/t0k3n"}]',
         'channel a: "heartbeat_url" must be an http(s) URL'),
        ('[{"name": "a", "type": "slack", "url": "https://x.invalid", "heartbeat_url": "https://hc/%s"}]'
         % ("t" * 500), 'channel a: "heartbeat_url" must be'),
        ('[{"name": "a", "type": "slack", "url": "https://x.invalid", "heartbeat_minutes": 0}]',
         'channel a: "heartbeat_minutes" must be a whole number from 1 to 60'),
        ('[{"name": "a", "type": "slack", "url": "https://x.invalid", "heartbeat_minutes": "5"}]',
         'channel a: "heartbeat_minutes"'),
        ('[{"name": "a", "type": "slack", "url": "https://x.invalid", "daily_digest_at": "24:00"}]',
         'channel a: "daily_digest_at" must be "HH:MM"'),
        ('[{"name": "dingtalk", "heartbeat_url": "https://hc/x", "daily_digest_at": "9:00"}]',
         'channel dingtalk: "daily_digest_at"'),
    ],
)
def test_a_malformed_channel_list_names_the_problem(raw, message):
    with pytest.raises(ImproperlyConfigured, match="ALERT_CHANNELS") as caught:
        parse_channels(raw)
    assert message in str(caught.value) and "t0k3n" not in str(caught.value)


def test_the_robot_takes_its_heartbeat_and_digest_from_an_entry_named_dingtalk(settings):
    settings.DINGTALK_WEBHOOK = "https://oapi.dingtalk.invalid/robot/send?access_token=tok"
    settings.ALERT_CHANNELS = [
        {"name": "dingtalk", "heartbeat_url": "https://hc.invalid/ping/0b5e1d4c", "daily_digest_at": "09:30"},
        {"name": "m", "type": "email", "to": ["a@example.com"], "heartbeat_minutes": 15},
    ]
    robot, mail = configured_channels()
    assert (robot.name, robot.url, robot.daily_digest_at, robot.heartbeat_minutes) == (
        "dingtalk", settings.DINGTALK_WEBHOOK, "09:30", 5)
    assert "0b5e1d4c" not in repr(robot) + scrub("GET /ping/0b5e1d4c?x=1 HTTP/1.1", robot)
    assert (mail.heartbeat_url, mail.heartbeat_minutes, mail.daily_digest_at) == ("", 15, "")


def test_a_new_cause_goes_where_deaths_or_new_causes_go(settings):
    settings.ALERT_CHANNELS = [
        {"name": "all", "type": "email", "to": ["a@example.com"]},
        {"name": "new-only", "type": "email", "to": ["b@example.com"], "events": ["new_cause", "resolved"]},
        {"name": "batches", "type": "email", "to": ["c@example.com"], "events": ["batch"]},
    ]
    assert [c.name for c in routed_channels(event="death")] == ["all"]
    assert [c.name for c in routed_channels(event="death", new=True)] == ["all", "new-only"]
    assert [c.name for c in routed_channels(event="resolved")] == ["all", "new-only"]
    assert [c.name for c in routed_channels(event="batch")] == ["all", "batches"]


def test_the_dingtalk_robot_is_the_first_channel(settings):
    settings.DINGTALK_WEBHOOK = "https://oapi.dingtalk.invalid/robot/send?access_token=tok"
    settings.ALERT_CHANNELS = [{"name": "m", "type": "email", "to": ["a@example.com"]}]
    assert [c.name for c in routed_channels(event="death")] == ["dingtalk", "m"]
    settings.DINGTALK_WEBHOOK = ""
    assert [c.name for c in routed_channels(event="death")] == ["m"]


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("https://hooks.slack.invalid/services/T1/B2/s3cr3tXY", "s3cr3tXY"),
        ("https://qyapi.invalid/cgi-bin/webhook/send?key=k3y-9", "k3y-9"),
        ("https://open.feishu.invalid/open-apis/bot/v2/hook/ab12cd", "ab12cd"),
        ("https://ops.invalid/hooks/Zq8", "Zq8"),
    ],
)
def test_a_short_url_secret_never_survives_in_a_stored_error(url, secret):
    channel = Channel("c", "slack", url=url)
    path = url.split(".invalid", 1)[1]
    for text in (
        f"ConnectionError: HTTPSConnectionPool(host='x', port=443): Max retries exceeded with url: {path}",
        f"POST {path} HTTP/1.1 404",
        f"HTTP 404: no such hook {secret}",
    ):
        assert secret not in scrub(text, channel), text
    assert "Max retries exceeded" in scrub(f"Max retries exceeded with url: {path}", channel)
