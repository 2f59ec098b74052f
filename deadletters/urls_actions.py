from django.urls import path

from deadletters.views import actions

urlpatterns = [
    path("dead-letters/<int:letter_id>/replay/", actions.replay, name="deadletter-replay"),
    path("dead-letters/<int:letter_id>/replay/edit/", actions.replay_edit, name="deadletter-replay-edit"),
    path("dead-letters/<int:letter_id>/archive/", actions.archive, name="deadletter-archive"),
    path("dead-letters/<int:letter_id>/discard/", actions.discard, name="deadletter-discard"),
    path("dead-letters/<int:letter_id>/restore/", actions.restore, name="deadletter-restore"),
    path("bulk/", actions.bulk_list, name="bulk-list"),
    path("bulk/preview/", actions.bulk_preview, name="bulk-preview"),
    path("bulk/start/", actions.bulk_start, name="bulk-start"),
    path("bulk/<uuid:public_id>/", actions.bulk_detail, name="bulk-detail"),
    path("bulk/<uuid:public_id>/pause/", actions.bulk_pause, name="bulk-pause"),
    path("bulk/<uuid:public_id>/resume/", actions.bulk_resume, name="bulk-resume"),
    path("bulk/<uuid:public_id>/cancel/", actions.bulk_cancel, name="bulk-cancel"),
]
