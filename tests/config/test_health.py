"""/healthz and /readyz: anonymous probes for a load balancer; no secrets, no versions."""

from config.embedded_redis import free_port


def test_healthz_answers_anonymously_without_io(client):
    # No database fixture: a query would fail this test.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_readyz_checks_the_database_and_redis(client, db):
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is True


def test_readyz_names_redis_when_it_is_down_and_leaks_no_address(client, db, settings):
    settings.REDIS_URL = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response["Retry-After"]
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is False
    assert "s3cret" not in response.content.decode() and "127.0.0.1" not in response.content.decode()


def test_probes_refuse_writes(client):
    assert client.post("/healthz").status_code == 405


def test_probes_are_not_redirected_to_https(client, db, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/console/").status_code == 301
