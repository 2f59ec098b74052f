"""The console's language: the browser's Accept-Language, the header switch, the operator's stored choice."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from console.models import OperatorPreference
from tests.conftest import operators_group
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db

PASSWORD = "pw-lang-12345"


@pytest.fixture
def operator():
    user = get_user_model().objects.create_user("lin", "lin@example.invalid", PASSWORD, is_staff=True)
    user.groups.add(operators_group())
    return user


def _login(client: Client, **headers):
    response = client.post("/console/login/", {"username": "lin", "password": PASSWORD}, **headers)
    assert response.status_code == 302, response.content.decode()[:500]
    return response


def _text(response) -> str:
    return response.content.decode()


def test_the_browser_language_decides_when_nobody_chose(client, operator):
    client.force_login(operator)
    chinese = client.get("/console/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    english = client.get("/console/", HTTP_ACCEPT_LANGUAGE="en-GB,en;q=0.9")
    anything_else = client.get("/console/", HTTP_ACCEPT_LANGUAGE="fr-FR")
    assert '<html lang="zh-Hans">' in _text(chinese) and "<h1>仪表盘</h1>" in _text(chinese)
    assert chinese["Content-Language"] == "zh-hans"
    assert '<html lang="en">' in _text(english) and "<h1>Dashboard</h1>" in _text(english)
    assert "<h1>Dashboard</h1>" in _text(anything_else)


def test_the_switch_works_signed_out_and_returns_to_the_page(client):
    response = client.post("/console/language/",
                           {"language": "zh-hans", "next": "/console/login/?next=/console/"})
    assert response.status_code == 302 and response["Location"] == "/console/login/?next=/console/"
    assert response.cookies["django_language"].value == "zh-hans"
    page = client.get("/console/login/", HTTP_ACCEPT_LANGUAGE="en")
    assert "登录报表控制台" in _text(page)
    # The switch names the other language in that language, a button in a plain form.
    assert '<button type="submit" name="language" value="en" lang="en"' in _text(page)
    assert 'action="/console/language/"' in _text(page)


def test_the_switch_refuses_other_sites_and_unknown_languages(client):
    away = client.post("/console/language/", {"language": "zh-hans", "next": "https://evil.example/"})
    assert away["Location"] == "/console/"
    unknown = client.post("/console/language/", {"language": "tlh", "next": "/console/login/"})
    assert unknown.status_code == 302 and "django_language" not in unknown.cookies
    assert client.get("/console/language/").status_code == 405


def test_the_switch_needs_the_csrf_token():
    strict = Client(enforce_csrf_checks=True)
    assert strict.post("/console/language/", {"language": "zh-hans", "next": "/"}).status_code == 403


def test_a_signed_in_choice_is_stored_and_follows_the_operator_to_another_device(client, operator):
    _login(client)
    client.post("/console/language/", {"language": "zh-hans", "next": "/console/"})
    assert OperatorPreference.objects.get(user=operator).language == "zh-hans"
    # Another device: no cookie, a browser asking for English. The stored choice wins from the sign-in on.
    laptop = Client()
    laptop.get("/console/login/", HTTP_ACCEPT_LANGUAGE="en")
    _login(laptop, HTTP_ACCEPT_LANGUAGE="en")
    page = laptop.get("/console/dead-letters/", HTTP_ACCEPT_LANGUAGE="en")
    assert '<html lang="zh-Hans">' in _text(page) and "<h1>死信</h1>" in _text(page)
    assert laptop.cookies["django_language"].value == "zh-hans"


def test_the_choice_outlives_a_logout(client, operator):
    _login(client)
    client.post("/console/language/", {"language": "zh-hans", "next": "/console/"})
    client.post("/console/logout/")
    login_page = client.get("/console/login/", HTTP_ACCEPT_LANGUAGE="en")
    assert "登录报表控制台" in _text(login_page)
    _login(client, HTTP_ACCEPT_LANGUAGE="en")
    assert "<h1>仪表盘</h1>" in _text(client.get("/console/", HTTP_ACCEPT_LANGUAGE="en"))


def test_a_choice_made_on_the_login_page_becomes_the_stored_one(client, operator):
    OperatorPreference.objects.create(user=operator, language="en")
    client.post("/console/language/", {"language": "zh-hans", "next": "/console/login/"})
    _login(client)
    assert OperatorPreference.objects.get(user=operator).language == "zh-hans"
    assert "<h1>仪表盘</h1>" in _text(client.get("/console/"))


def test_switching_back_to_english_is_stored_too(client, operator):
    OperatorPreference.objects.create(user=operator, language="zh-hans")
    _login(client)
    assert "<h1>仪表盘</h1>" in _text(client.get("/console/", HTTP_ACCEPT_LANGUAGE="zh"))
    client.post("/console/language/", {"language": "en", "next": "/console/"})
    assert OperatorPreference.objects.get(user=operator).language == "en"
    assert "<h1>Dashboard</h1>" in _text(client.get("/console/", HTTP_ACCEPT_LANGUAGE="zh"))


def test_dates_and_durations_follow_the_language(client, operator):
    letter = make_dead_letter(error_message="late")
    client.force_login(operator)
    chinese = _text(client.get(f"/console/dead-letters/{letter.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans"))
    english = _text(client.get(f"/console/dead-letters/{letter.pk}/", HTTP_ACCEPT_LANGUAGE="en"))
    # The auto-archive countdown: Django's own duration words, in each language.
    assert "6\xa0日、23\xa0小时后" in chinese and "in 6\xa0days, 23\xa0hours" in english


def test_a_json_api_client_gets_english_unless_it_asks_for_chinese(token_client):
    """Field names never change; the words of a report kind's validation follow Accept-Language."""
    body = '{"kind": "probe", "params": {"unknown_param": 1}}'
    plain = token_client.post("/report/task/submit", body, content_type="application/json")
    chinese = token_client.post(
        "/report/task/submit", body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="zh-CN"
    )
    assert plain.status_code == chinese.status_code == 422
    # A 422 lists every bad field in `errors` too (field and error name the first).
    assert plain.json() == {
        "error": "unknown parameter",
        "field": "unknown_param",
        "errors": [{"field": "unknown_param", "error": "unknown parameter"}],
    }
    assert chinese.json() == {
        "error": "未知参数",
        "field": "unknown_param",
        "errors": [{"field": "unknown_param", "error": "未知参数"}],
    }
