"""The console's URLs, grouped as its navigation is."""

from django.urls import path, re_path

from console import language
from console.views import (
    alerts,
    audit,
    batches,
    bulk,
    bulk_plans,
    causes,
    charts,
    dashboard,
    dead_letters,
    kinds,
    letter_actions,
    live,
    tasks,
)

app_name = "console"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("charts/", charts.charts, name="charts"),
    # The header's language switch: open to anyone (the login page has it too), POST only.
    path("language/", language.set_language, name="set-language"),
    # Dead letters and the actions on one letter.
    path("dead-letters/", dead_letters.deadletter_list, name="deadletter-list"),
    path("dead-letters/groups/", dead_letters.deadletter_groups, name="deadletter-groups"),
    path("dead-letters/<int:letter_id>/", dead_letters.deadletter_detail, name="deadletter-detail"),
    path(
        "dead-letters/<int:letter_id>/traceback.txt",
        dead_letters.deadletter_traceback,
        name="deadletter-traceback",
    ),
    path("dead-letters/<int:letter_id>/replay/", letter_actions.replay, name="deadletter-replay"),
    path("dead-letters/<int:letter_id>/replay/edit/", letter_actions.replay_edit,
         name="deadletter-replay-edit"),
    path("dead-letters/<int:letter_id>/replay/later/", bulk_plans.replay_later,
         name="deadletter-replay-later"),
    path("dead-letters/<int:letter_id>/archive/", letter_actions.archive, name="deadletter-archive"),
    path("dead-letters/<int:letter_id>/discard/", letter_actions.discard, name="deadletter-discard"),
    path("dead-letters/<int:letter_id>/restore/", letter_actions.restore, name="deadletter-restore"),
    # Report tasks.
    path("tasks/", tasks.task_list, name="task-list"),
    path("tasks/<uuid:public_id>/", tasks.task_detail, name="task-detail"),
    path("tasks/<uuid:public_id>/state/", tasks.task_state, name="task-state"),
    path("tasks/<uuid:public_id>/output", tasks.task_output, name="task-output"),
    path("tasks/<uuid:public_id>/cancel/", live.cancel, name="task-cancel"),
    path("tasks/<uuid:public_id>/retry-now/", live.retry_now, name="task-retry-now"),
    path("tasks/<uuid:public_id>/stop/", live.stop, name="task-stop"),
    # Live tasks.
    path("running/", live.running_list, name="running"),
    path("retrying/", live.retrying_list, name="retrying"),
    # Audit log.
    path("audit/", audit.audit, name="audit"),
    # Bulk actions.
    path("bulk/", bulk.bulk_list, name="bulk-list"),
    path("bulk/preview/", bulk.bulk_preview, name="bulk-preview"),
    path("bulk/start/", bulk.bulk_start, name="bulk-start"),
    path("bulk/<uuid:public_id>/", bulk.bulk_detail, name="bulk-detail"),
    path("bulk/<uuid:public_id>/pause/", bulk.bulk_pause, name="bulk-pause"),
    path("bulk/<uuid:public_id>/resume/", bulk.bulk_resume, name="bulk-resume"),
    path("bulk/<uuid:public_id>/cancel/", bulk.bulk_cancel, name="bulk-cancel"),
    path("bulk/<uuid:public_id>/rate/", bulk.bulk_rate, name="bulk-rate"),
    # Batches and report kinds.
    path("batches/", batches.batch_list, name="batch-list"),
    path("batches/<uuid:public_id>/", batches.batch_detail, name="batch-detail"),
    path("batches/<uuid:public_id>/progress/", batches.batch_progress_partial, name="batch-progress"),
    path("kinds/", kinds.kind_list, name="kind-list"),
    path("kinds/<str:kind>/", kinds.kind_detail, name="kind-detail"),
    path("alerts/snoozes/", alerts.snooze_list, name="alert-snoozes"),
    path("alerts/snooze/", alerts.snooze_create, name="alert-snooze"),
    path("alerts/snoozes/<int:snooze_id>/lift/", alerts.snooze_lift, name="alert-snooze-lift"),
    path("causes/<str:fingerprint>/note/", alerts.cause_note, name="cause-note"),
    re_path(r"^causes/(?P<fingerprint>[0-9a-f]{40})/fixed/$", causes.cause_fixed, name="cause-fixed"),
    path("kinds/<str:kind>/pause/", kinds.kind_pause, name="kind-pause"),
    path("kinds/<str:kind>/resume/", kinds.kind_resume, name="kind-resume"),
    path("kinds/<str:kind>/breaker/", kinds.kind_breaker, name="kind-breaker"),
]
