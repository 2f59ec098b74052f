from django.contrib.auth.management import create_permissions
from django.db import migrations

EDIT_PERMISSION = ("deadletters", "replay_edited_deadletter")


def grant_to_operators(apps, schema_editor):
    # Permissions are normally created after all migrations; the group needs this one now.
    app_config = apps.get_app_config("deadletters")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.get(content_type__app_label=EDIT_PERMISSION[0], codename=EDIT_PERMISSION[1])
    for group in Group.objects.filter(name="Operators"):
        group.permissions.add(permission)


def revoke_from_operators(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Permission.objects.filter(content_type__app_label=EDIT_PERMISSION[0], codename=EDIT_PERMISSION[1]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("deadletters", "0002_operators_group"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="deadletter",
            options={
                "permissions": [
                    ("replay_deadletter", "Can replay dead letters"),
                    ("archive_deadletter", "Can archive, discard and restore dead letters"),
                    ("replay_edited_deadletter", "Can replay dead letters with edited params"),
                ]
            },
        ),
        migrations.RunPython(grant_to_operators, revoke_from_operators),
    ]
