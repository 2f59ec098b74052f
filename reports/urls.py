from django.urls import path

from reports import views
from reports.api import batches as api_batches
from reports.api import views as api

app_name = "reports"

urlpatterns = [
    path("demo/orders.json", views.demo_orders_json, name="demo-orders-json"),
    # JSON API: the original report scheduler's paths (see reports/api/openapi.py).
    path("openapi.json", api.openapi, name="api-openapi"),
    path("task/submit", api.submit, name="api-task-submit"),
    path("task/dead-letters", api.dead_letters, name="api-dead-letters"),
    path("task/<str:task_id>/status", api.task_status, name="api-task-status"),
    path("task/<str:task_id>/replay", api.task_replay, name="api-task-replay"),
    path("task/<str:task_id>/output", api.task_output, name="api-task-output"),
    # Batches (reports/api/batches.py).
    path("batch/submit", api_batches.batch_submit, name="api-batch-submit"),
    path("batch/<str:batch_id>/status", api_batches.batch_status, name="api-batch-status"),
]
