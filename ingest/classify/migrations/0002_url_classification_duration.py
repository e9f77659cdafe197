from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("classify", "0001_url_classification_ledger")]

    operations = [
        migrations.AddField(
            model_name="urlclassification",
            name="duration_ms",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
