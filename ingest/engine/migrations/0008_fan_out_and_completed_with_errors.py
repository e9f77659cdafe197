"""Issue 16: a failure's state for replay (Step.error_state), the completed_with_errors status
(24 characters of status), the fan_out step kind, and the fan-out aggregate (FanOut, FanOutItem).

The status columns are widened with a plain ALTER on PostgreSQL (no rewrite: a longer varchar
is binary-compatible) and not at all on SQLite, which enforces no length: Django's AlterField
there rebuilds the table, which would drop engine_instance's search triggers (0006)."""

import django.db.models.deletion
from django.db import migrations, models


def _alter_status(schema_editor, length: int) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in ("engine_instance", "engine_history"):
        schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN status TYPE varchar({length})")


def _widen_status(apps, schema_editor) -> None:
    _alter_status(schema_editor, 24)


def _narrow_status(apps, schema_editor) -> None:
    _alter_status(schema_editor, 20)


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0007_instance_search_pattern_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='step',
            name='error_state',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='history',
                    name='status',
                    field=models.CharField(blank=True, default='', max_length=24),
                ),
                migrations.AlterField(
                    model_name='instance',
                    name='status',
                    field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('paused', 'Paused'), ('waiting', 'Waiting'), ('waitingForPause', 'Waiting For Pause'), ('complete', 'Complete'), ('completed_with_errors', 'Completed With Errors'), ('errored', 'Errored'), ('terminated', 'Terminated')], default='queued', max_length=24),
                ),
            ],
            database_operations=[migrations.RunPython(_widen_status, _narrow_status)],
        ),
        migrations.AlterField(
            model_name='step',
            name='kind',
            field=models.CharField(choices=[('do', 'Do'), ('sleep', 'Sleep'), ('wait_event', 'Wait Event'), ('child', 'Child'), ('fan_out', 'Fan Out'), ('rollback', 'Rollback')], default='do', max_length=12),
        ),
        migrations.CreateModel(
            name='FanOut',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('step_name', models.CharField(max_length=300)),
                ('handler', models.CharField(max_length=200)),
                ('handler_kind', models.CharField(max_length=10)),
                ('item_workflow', models.CharField(max_length=200)),
                ('expected', models.IntegerField()),
                ('created', models.IntegerField(default=0)),
                ('received', models.IntegerField(default=0)),
                ('failed', models.IntegerField(default=0)),
                ('state', models.CharField(choices=[('open', 'Open'), ('complete', 'Complete'), ('timed_out', 'Timed Out')], default='open', max_length=12)),
                ('started_at', models.DateTimeField()),
                ('updated_at', models.DateTimeField()),
                ('deadline', models.DateTimeField()),
                ('closed_at', models.DateTimeField(blank=True, null=True)),
                ('instance', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='fan_outs', to='engine.instance')),
                ('step', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='fan_out', to='engine.step')),
            ],
        ),
        migrations.CreateModel(
            name='FanOutItem',
            fields=[
                ('instance', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='fan_out_item', serialize=False, to='engine.instance')),
                ('index', models.IntegerField()),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('complete', 'Complete'), ('errored', 'Errored'), ('terminated', 'Terminated'), ('missing', 'Missing')], default='pending', max_length=12)),
                ('result', models.JSONField(blank=True, null=True)),
                ('error_name', models.CharField(blank=True, default='', max_length=200)),
                ('error_message', models.TextField(blank=True, default='')),
                ('error_state', models.JSONField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('fan_out', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='items', to='engine.fanout')),
            ],
        ),
        migrations.AddIndex(
            model_name='fanout',
            index=models.Index(fields=['instance', 'started_at'], name='fanout_instance'),
        ),
        migrations.AddConstraint(
            model_name='fanoutitem',
            constraint=models.UniqueConstraint(fields=('fan_out', 'index'), name='fanout_item_index'),
        ),
    ]
