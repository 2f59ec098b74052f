from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/console/", permanent=False)),
    # Browsers ask for /favicon.ico whatever the page says; the file lives with the other assets.
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.ico"), permanent=True)),
    path("admin/", admin.site.urls),
    path("report/", include("reports.urls")),
    path("report/", include("api.urls")),
    path("console/", include("django.contrib.auth.urls")),
    path("console/", include("console.urls")),
]
