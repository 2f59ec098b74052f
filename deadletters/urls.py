from django.urls import path

from deadletters import views

app_name = "console"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
]
