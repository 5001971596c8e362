from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[
                (
                    "id",
                    models.AutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "dashboard",
                "verbose_name_plural": "dashboard",
                "permissions": [
                    ("view_dashboard", "Can view locks, queues, jobs and workers"),
                    ("release_lock", "Can force-release locks"),
                    ("manage_queues", "Can run, retry, delete and purge jobs"),
                ],
                "managed": False,
                "default_permissions": (),
            },
        ),
    ]
