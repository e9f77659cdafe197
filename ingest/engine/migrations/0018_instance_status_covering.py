from django.db import migrations, models


class Migration(migrations.Migration):
    """instance_status covers tenant, id and updated_at: the instances list's capped count over
    statuses (3 statuses sorted by updated: a scan to the 10,001st match of the user's tenants,
    ~6,000 heap pages) and a status + search attribute filter (a hash join with the attribute
    rows instead of 10,000 heap probes) read the index alone (docs/bulk-actions.md)."""

    dependencies = [
        ('engine', '0017_instance_updated_index'),
    ]

    operations = [
        migrations.RemoveIndex(model_name='instance', name='instance_status'),
        migrations.AddIndex(
            model_name='instance',
            index=models.Index(fields=['status', '-created_at'], include=('tenant', 'id', 'updated_at'),
                               name='instance_status'),
        ),
    ]
