"""The console routes only Django's login and logout views, none of its password pages."""

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db

PASSWORD_PAGES = [
    "/console/password_reset/",
    "/console/password_reset/done/",
    "/console/reset/MQ/set-password/",
    "/console/reset/done/",
    "/console/password_change/",
    "/console/password_change/done/",
]


@pytest.mark.parametrize("path", PASSWORD_PAGES)
def test_password_pages_are_not_routed(client, path):
    assert client.get(path).status_code == 404
    user = get_user_model().objects.create_user("staff1", "", "right-password-1", is_staff=True)
    client.force_login(user)
    assert client.get(path).status_code == 404


def test_login_and_logout_still_work(client):
    get_user_model().objects.create_user("staff2", "", "right-password-1", is_staff=True)
    assert client.get("/console/login/").status_code == 200
    response = client.post("/console/login/", {"username": "staff2", "password": "right-password-1"})
    assert response.status_code == 302 and response["Location"] == "/console/"
    response = client.post("/console/logout/")
    assert response.status_code == 302 and response["Location"] == "/console/login/"
    assert "_auth_user_id" not in client.session
