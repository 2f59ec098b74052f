from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Operator console"

    def ready(self):
        # Connects the sign-in receiver that applies the operator's stored language.
        from console import language  # noqa: F401
