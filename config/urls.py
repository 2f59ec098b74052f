from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/console/", permanent=False)),
    path("admin/", admin.site.urls),
    path("report/", include("reports.urls")),
    path("console/", include("django.contrib.auth.urls")),
    path("console/", include("deadletters.urls")),
]
