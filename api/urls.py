"""The JSON API, on the original report scheduler's paths (under /report/, see api/openapi)."""

from django.urls import path

from api import alerts, batches, bulk, dead_letters, docs, groups, operator_actions, task_controls, tasks
from api.causes import cause_fixed, cause_mute, cause_show

app_name = "api"

urlpatterns = [
    path("openapi.json", docs.openapi, name="openapi"),
    path("task/submit", tasks.submit, name="task-submit"),
    path("task/dead-letters", dead_letters.dead_letters, name="dead-letters"),
    path("dead-letters/groups", groups.dead_letter_groups, name="dead-letter-groups"),
    path("cause/<str:fingerprint>/note", groups.cause_note_view, name="cause-note"),
    path("cause/<str:fingerprint>", cause_show, name="cause-show"),
    path("cause/<str:fingerprint>/fixed", cause_fixed, name="cause-fixed"),
    path("cause/<str:fingerprint>/mute", cause_mute, name="cause-mute"),
    path("task/<str:task_id>/status", tasks.task_status, name="task-status"),
    path("task/<str:task_id>/replay", tasks.task_replay, name="task-replay"),
    path("task/<str:task_id>/output", tasks.task_output, name="task-output"),
    path("task/<str:task_id>/cancel", task_controls.task_cancel_view, name="task-cancel"),
    path("task/<str:task_id>/retry-now", task_controls.task_retry_now_view, name="task-retry-now"),
    path("task/<str:task_id>/stop", task_controls.task_stop_view, name="task-stop"),
    path("dead-letter/<str:letter_id>/archive", operator_actions.dead_letter_archive,
         name="dead-letter-archive"),
    path("dead-letter/<str:letter_id>/discard", operator_actions.dead_letter_discard,
         name="dead-letter-discard"),
    path("dead-letter/<str:letter_id>/restore", operator_actions.dead_letter_restore,
         name="dead-letter-restore"),
    path("dead-letter/<str:letter_id>/replay", operator_actions.dead_letter_replay,
         name="dead-letter-replay"),
    path("kind/<str:kind>/pause", operator_actions.kind_pause, name="kind-pause"),
    path("kind/<str:kind>/resume", operator_actions.kind_resume, name="kind-resume"),
    path("kind/<str:kind>/breaker", operator_actions.kind_breaker, name="kind-breaker"),
    path("bulk/start", bulk.bulk_start, name="bulk-start"),
    path("bulk/<str:bulk_id>/status", bulk.bulk_status, name="bulk-status"),
    path("bulk/<str:bulk_id>/pause", bulk.bulk_pause, name="bulk-pause"),
    path("bulk/<str:bulk_id>/resume", bulk.bulk_resume, name="bulk-resume"),
    path("bulk/<str:bulk_id>/cancel", bulk.bulk_cancel, name="bulk-cancel"),
    path("bulk/<str:bulk_id>/rate", bulk.bulk_rate, name="bulk-rate"),
    path("batch/submit", batches.batch_submit, name="batch-submit"),
    path("batch/<str:batch_id>/status", batches.batch_status, name="batch-status"),
    path("alerts/snooze", alerts.snooze, name="alerts-snooze"),
    path("alerts/snoozes", alerts.snoozes, name="alerts-snoozes"),
    path("alerts/snooze/<str:snooze_id>/lift", alerts.snooze_lift, name="alerts-snooze-lift"),
    path("alerts/channels", alerts.channels, name="alerts-channels"),
]
