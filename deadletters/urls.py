from django.urls import include, path

app_name = "console"

# Pages (read side) and actions (state changes) live in separate modules so each stays small.
urlpatterns = [
    path("", include("deadletters.urls_pages")),
    path("", include("deadletters.urls_actions")),
    path("", include("deadletters.urls_batches")),
]
