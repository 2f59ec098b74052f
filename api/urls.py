"""The JSON API, on the original report scheduler's paths (under /report/, see api/openapi)."""

from django.urls import path

from api import batches, dead_letters, docs, task_controls, tasks

app_name = "api"

urlpatterns = [
    path("openapi.json", docs.openapi, name="openapi"),
    path("task/submit", tasks.submit, name="task-submit"),
    path("task/dead-letters", dead_letters.dead_letters, name="dead-letters"),
    path("task/<str:task_id>/status", tasks.task_status, name="task-status"),
    path("task/<str:task_id>/replay", tasks.task_replay, name="task-replay"),
    path("task/<str:task_id>/output", tasks.task_output, name="task-output"),
    path("task/<str:task_id>/cancel", task_controls.task_cancel_view, name="task-cancel"),
    path("task/<str:task_id>/retry-now", task_controls.task_retry_now_view, name="task-retry-now"),
    path("task/<str:task_id>/stop", task_controls.task_stop_view, name="task-stop"),
    path("batch/submit", batches.batch_submit, name="batch-submit"),
    path("batch/<str:batch_id>/status", batches.batch_status, name="batch-status"),
]
