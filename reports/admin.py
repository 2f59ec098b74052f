from django.contrib import admin

from reports.models import ReportTask, TaskAttempt


class ReadOnlyAdmin(admin.ModelAdmin):
    """State changes go through services; the admin is for looking."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser


class TaskAttemptInline(admin.TabularInline):
    model = TaskAttempt
    extra = 0
    can_delete = False
    fields = ("number", "outcome", "worker", "started_at", "finished_at", "duration_seconds", "error_type")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ReportTask)
class ReportTaskAdmin(ReadOnlyAdmin):
    list_display = (
        "public_id",
        "kind",
        "status",
        "priority",
        "attempt",
        "max_attempts",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "kind", "priority")
    search_fields = ("public_id", "idempotency_key")
    date_hierarchy = "created_at"
    show_full_result_count = False
    inlines = [TaskAttemptInline]
