"""The JSON API, on the original report scheduler's paths (under /report/, see api/openapi)."""

from django.urls import path

from api import alerts, batches, dead_letters, docs, tasks

app_name = "api"

urlpatterns = [
    path("openapi.json", docs.openapi, name="openapi"),
    path("task/submit", tasks.submit, name="task-submit"),
    path("task/dead-letters", dead_letters.dead_letters, name="dead-letters"),
    path("task/<str:task_id>/status", tasks.task_status, name="task-status"),
    path("task/<str:task_id>/replay", tasks.task_replay, name="task-replay"),
    path("task/<str:task_id>/output", tasks.task_output, name="task-output"),
    path("batch/submit", batches.batch_submit, name="batch-submit"),
    path("batch/<str:batch_id>/status", batches.batch_status, name="batch-status"),
    path("alerts/snooze", alerts.snooze, name="alerts-snooze"),
    path("alerts/snoozes", alerts.snoozes, name="alerts-snoozes"),
    path("alerts/snooze/<str:snooze_id>/lift", alerts.snooze_lift, name="alerts-snooze-lift"),
]
