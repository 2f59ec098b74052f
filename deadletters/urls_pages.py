from django.urls import path

from deadletters.views import pages

urlpatterns = [
    path("", pages.dashboard, name="dashboard"),
]
