from django.contrib import admin

from deadletters.models import AuditEntry, DeadLetter
from reports.admin import ReadOnlyAdmin


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    list_display = ("id", "task", "kind", "error_type", "status", "attempts", "created_at", "expire_at")
    list_filter = ("status", "kind")
    search_fields = ("fingerprint", "error_message")
    show_full_result_count = False
    raw_id_fields = ("task",)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "action", "source", "item_count", "task", "dead_letter")
    list_filter = ("action", "source")
    show_full_result_count = False
    raw_id_fields = ("task", "dead_letter")
