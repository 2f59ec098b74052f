from django.urls import path

from deadletters.views import batches

urlpatterns = [
    path("batches/", batches.batch_list, name="batch-list"),
    path("batches/<uuid:public_id>/", batches.batch_detail, name="batch-detail"),
    path("batches/<uuid:public_id>/progress/", batches.batch_progress_partial, name="batch-progress"),
    path("kinds/", batches.kind_list, name="kind-list"),
    path("kinds/<str:kind>/pause/", batches.kind_pause, name="kind-pause"),
    path("kinds/<str:kind>/resume/", batches.kind_resume, name="kind-resume"),
]
