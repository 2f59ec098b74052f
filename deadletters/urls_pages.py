from django.urls import path

from deadletters.views import pages

urlpatterns = [
    path("", pages.dashboard, name="dashboard"),
    path("dead-letters/", pages.deadletter_list, name="deadletter-list"),
    path("dead-letters/groups/", pages.deadletter_groups, name="deadletter-groups"),
    path("dead-letters/<int:letter_id>/", pages.deadletter_detail, name="deadletter-detail"),
    path(
        "dead-letters/<int:letter_id>/traceback.txt", pages.deadletter_traceback, name="deadletter-traceback"
    ),
    path("tasks/<uuid:public_id>/state/", pages.task_state, name="task-state"),
    path("audit/", pages.audit, name="audit"),
    path("tasks/", pages.task_list, name="task-list"),
    path("tasks/<uuid:public_id>/", pages.task_detail, name="task-detail"),
    path("tasks/<uuid:public_id>/output", pages.task_output, name="task-output"),
]
