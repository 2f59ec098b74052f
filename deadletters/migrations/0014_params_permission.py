from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW_PARAMS = ("deadletters", "view_params")


def grant_to_operators(apps, schema_editor):
    # Permissions are normally created after all migrations; the group needs this one now.
    app_config = apps.get_app_config("deadletters")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps)
    app_config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.get(content_type__app_label=VIEW_PARAMS[0], codename=VIEW_PARAMS[1])
    for group in apps.get_model("auth", "Group").objects.filter(name="Operators"):
        group.permissions.add(permission)


class Migration(migrations.Migration):
    dependencies = [
        ("deadletters", "0013_bulk_source"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="deadletter",
            options={
                "permissions": [
                    ("replay_deadletter", "Can replay dead letters"),
                    ("archive_deadletter", "Can archive, discard and restore dead letters"),
                    ("replay_edited_deadletter", "Can replay dead letters with edited params"),
                    ("view_params", "Can see task params and tracebacks"),
                ]
            },
        ),
        migrations.RunPython(grant_to_operators, migrations.RunPython.noop),
    ]
