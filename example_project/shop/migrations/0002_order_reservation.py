from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="order",
            name="reservation",
            field=models.CharField(blank=True, max_length=64, null=True, unique=True),
        ),
    ]
