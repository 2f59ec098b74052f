"""The demo JSON source is anonymous, so only the embedded demo setup serves it."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_demo_setup_serves_the_demo_orders(client, settings):
    settings.DEMO_SETUP = True
    response = client.get("/report/demo/orders.json")
    assert response.status_code == 200
    assert response.json() == {"data": {"items": []}}


def test_outside_the_demo_setup_the_demo_orders_are_not_found(client, settings):
    settings.DEMO_SETUP = False
    assert client.get("/report/demo/orders.json").status_code == 404

