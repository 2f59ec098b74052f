from django.contrib.auth.management import create_permissions
from django.db import migrations

OPERATOR_PERMISSIONS = [
    ("deadletters", "view_deadletter"),
    ("deadletters", "replay_deadletter"),
    ("deadletters", "archive_deadletter"),
    ("deadletters", "view_auditentry"),
    ("deadletters", "view_alert"),
    ("deadletters", "view_bulkaction"),
    ("reports", "view_reporttask"),
    ("reports", "view_reportbatch"),
]


def create_operators_group(apps, schema_editor):
    # Permissions are normally created after all migrations; the group needs them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="Operators")
    for app_label, codename in OPERATOR_PERMISSIONS:
        group.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))


def remove_operators_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="Operators").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("deadletters", "0001_initial"),
        ("reports", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_operators_group, remove_operators_group)]
