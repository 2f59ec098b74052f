"""Worker liveness on the dashboard: each live worker with its host, pid and heartbeat age."""

import socket

import pytest
from django.contrib.auth import get_user_model

from tests.conftest import operators_group


@pytest.mark.django_db(transaction=True)
def test_dashboard_lists_each_worker_with_host_pid_and_heartbeat_age(client, start_worker):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    worker = start_worker()

    body = client.get("/console/", HTTP_HX_REQUEST="true").content.decode()

    line = body.split(worker.name, 1)[1].split("</li>", 1)[0]
    assert f"{socket.gethostname()} pid {worker.pid}" in line
    age = int(line.split("heartbeat ", 1)[1].split(" s ago", 1)[0])
    assert 0 <= age < 60
