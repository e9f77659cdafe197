from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    """The instances list's "updated" sort: a LIMIT over this index stops after a page of rows
    instead of sorting every match. Partial: queued and running rows, which the engine's hot
    path updates, are not in it (3 statuses over 1 M instances sorted by updated: 326 ms of
    the page's 341 ms, docs/bulk-actions.md "Instances list figures")."""

    dependencies = [
        ('engine', '0016_metrics_covering_indexes'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='instance',
            index=models.Index(fields=['updated_at'], name='instance_updated',
                               condition=~Q(status__in=['queued', 'running', 'waitingForPause'])),
        ),
    ]
