"""A death card goes to a group chat: it lists the params' keys with masked values on every channel,
unless the channel says `"show_params": true`; a kind's sensitive values stay masked even then."""

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from deadletters.alerts import render, wire
from deadletters.alerts.channels import channel_named, parse_channels
from deadletters.alerts.outbox import enqueue_dead_letter_alert
from reports.kinds.masking import MASK
from tests.secret_kind import API_KEY, CUSTOMER, make_secret_letter, secret_kind  # noqa: F401

pytestmark = pytest.mark.django_db

BODIES = {
    "dingtalk": wire.dingtalk_body,
    "feishu": lambda channel, card: wire.feishu_body(channel, card, now=0),
    "wecom": wire.wecom_body,
    "slack": wire.slack_body,
    "webhook": lambda channel, card: wire.webhook_body(card, msg_uuid="m", now=0).decode(),
    "email": lambda channel, card: render.card_text(card),
}


@pytest.fixture
def every_channel(settings):
    settings.DINGTALK_WEBHOOK = "https://robot.invalid/send?access_token=t"
    hook = {"url": "https://hooks.invalid/x"}
    settings.ALERT_CHANNELS = [
        {"name": "feishu", "type": "feishu", **hook},
        {"name": "wecom", "type": "wecom", **hook},
        {"name": "slack", "type": "slack", **hook},
        {"name": "webhook", "type": "webhook", "secret": "s3cret", **hook},
        {"name": "email", "type": "email", "to": ["oncall@example.com"]},
        {"name": "trusted-slack", "type": "slack", "show_params": True, **hook},
    ]


def _cards(letter) -> dict[str, str]:
    """Each channel's wire body of the letter's death card, as text."""
    first = enqueue_dead_letter_alert(dead_letter=letter)
    bodies = {}
    for alert in letter.alerts.filter(pk__gte=first.pk):
        channel = channel_named(alert.channel)
        body = BODIES[channel.type](channel, render.alert_card(alert))
        bodies[alert.channel] = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return bodies


def test_every_channel_masks_params_unless_it_shows_them(every_channel, secret_kind):  # noqa: F811
    bodies = _cards(make_secret_letter())
    assert set(bodies) == {"dingtalk", "feishu", "wecom", "slack", "webhook", "email", "trusted-slack"}
    for name, body in bodies.items():
        assert API_KEY not in body, name
        assert f"api_key={MASK}" in body, name
        if name == "trusted-slack":
            assert f"customer={CUSTOMER}" in body and "rows=25" in body
        else:
            assert CUSTOMER not in body and f"customer={MASK}" in body and f"rows={MASK}" in body, name


def test_show_params_must_be_a_boolean():
    with pytest.raises(ImproperlyConfigured, match='"show_params" must be true or false'):
        parse_channels([{"name": "a", "type": "slack", "url": "https://x.invalid", "show_params": "yes"}])
