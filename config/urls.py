from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from config import health

# An outage of the database or Redis answers 503 (JSON or a page), any other error 500.
handler500 = "config.unavailable.server_error"

urlpatterns = [
    path("", RedirectView.as_view(url="/console/", permanent=False)),
    # Browsers ask for /favicon.ico whatever the page says; the file lives with the other assets.
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.ico"), permanent=True)),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("", include("api.metrics_urls")),
    path("admin/", admin.site.urls),
    path("report/", include("reports.urls")),
    path("report/", include("api.urls")),
    # Only these two of django.contrib.auth's views: the password-reset pages would mail links
    # from a site that has no mail set up, and password changes are the admin's business.
    path("console/login/", auth_views.LoginView.as_view(), name="login"),
    path("console/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("console/", include("console.urls")),
]
