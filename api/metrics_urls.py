"""GET /metrics, at the site's root where Prometheus looks by default (api/metrics.py)."""

from django.urls import path

from api.metrics import metrics

urlpatterns = [path("metrics", metrics, name="metrics")]
