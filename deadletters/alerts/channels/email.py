"""The email channel: Django's mail settings (EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER, ...), one
plain-text mail per message. The Message-ID is derived from the message's uuid, the same on every
resend, so a mail client shows a duplicate caused by a crash between sending and marking once."""

import smtplib

from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from deadletters.alerts.channels.config import Channel
from deadletters.alerts.channels.http import CONFIG, OK, REJECTED, RETRY, ChannelResult, scrub
from deadletters.alerts.channels.render import card_text


def message_id(msg_uuid: str) -> str:
    return f"<alert-{msg_uuid}@report-console>"


def send_mail(channel: Channel, card: dict, *, msg_uuid: str) -> ChannelResult:
    subject = " ".join(card["title"].split())
    if channel.keyword and channel.keyword not in subject:
        subject = f"[{channel.keyword}] {subject}"
    mail = EmailMessage(
        subject=subject,
        body=card_text(card),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(channel.to),
        headers={"Message-ID": message_id(msg_uuid), "X-Alert-Event": card["event"]},
    )
    try:
        connection = get_connection(timeout=channel.timeout)
        mail.connection = connection
        mail.send(fail_silently=False)
    except (smtplib.SMTPAuthenticationError, smtplib.SMTPSenderRefused, smtplib.SMTPRecipientsRefused) as exc:
        return ChannelResult(
            CONFIG, getattr(exc, "smtp_code", None), scrub(f"{type(exc).__name__}: {exc}", channel)[:500]
        )
    except smtplib.SMTPResponseException as exc:
        outcome = REJECTED if 500 <= exc.smtp_code < 600 else RETRY
        return ChannelResult(
            outcome, exc.smtp_code, scrub(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}", channel)[:500]
        )
    except (smtplib.SMTPException, OSError) as exc:
        return ChannelResult(
            RETRY, error=scrub(f"{type(exc).__name__}: {exc}", channel)[:500], transport_error=True
        )
    return ChannelResult(OK, code=0)
