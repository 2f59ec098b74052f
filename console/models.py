"""What the console keeps about an operator: the language they chose, on every device they use."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class OperatorPreference(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="console_preference",
        verbose_name=_("user"),
    )
    # Empty: follow the browser (the language cookie, then Accept-Language).
    language = models.CharField(_("language"), max_length=16, blank=True, choices=settings.LANGUAGES)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("operator preference")
        verbose_name_plural = _("operator preferences")

    def __str__(self) -> str:
        return f"{self.user} ({self.language or '-'})"
