from django.apps import AppConfig


class DeadLettersConfig(AppConfig):
    name = "deadletters"
    verbose_name = "Dead letters"
