"""DingTalk's 加签 on its own. The expected value was computed independently with
`printf '1700000000000\nSECabc123' | openssl dgst -sha256 -hmac SECabc123 -binary | base64`."""

from deadletters.alerts.client import RobotConfig, sign, signed_url

EXPECTED_BASE64 = "N5P09a4+p1AMJIJWnIvQd2Yxw9+fu/oEBnPrjCcsLXk="


def test_sign_is_the_url_encoded_base64_hmac_sha256_of_timestamp_newline_secret():
    encoded = sign("SECabc123", 1700000000000)

    assert encoded == EXPECTED_BASE64.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")


def test_signed_url_appends_timestamp_and_sign_to_the_webhook():
    robot = RobotConfig(webhook="https://oapi.dingtalk.com/robot/send?access_token=abc", secret="SECabc123")

    url = signed_url(robot, now=1700000000.0)

    assert url == (
        "https://oapi.dingtalk.com/robot/send?access_token=abc&timestamp=1700000000000"
        f"&sign={sign('SECabc123', 1700000000000)}"
    )


def test_without_a_secret_the_webhook_is_sent_as_it_is():
    robot = RobotConfig(webhook="https://oapi.dingtalk.com/robot/send?access_token=abc")

    assert signed_url(robot, now=1700000000.0) == robot.webhook
