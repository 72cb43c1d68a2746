# The model's state (managed = False: the SQL files make the table, not Django's
# schema editor), then stagedrain's schema through 006_routes.

from django.db import migrations, models
import django.utils.timezone
import stagedrain.ids
import uuid

from stagedrain.django.operations import ApplySchema


class Migration(migrations.Migration):

    initial = True

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='StagedJob',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('queue', models.TextField(default='default')),
                ('job_class', models.TextField()),
                ('args', models.JSONField(default=list)),
                ('run_at', models.DateTimeField(blank=True, null=True)),
                ('options', models.JSONField(default=dict)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('jid', models.TextField(default=stagedrain.ids.new_jid)),
                ('uuid', models.UUIDField(default=uuid.uuid4)),
                ('tenant', models.TextField(blank=True, null=True)),
                ('route', models.TextField(blank=True, null=True)),
            ],
            options={
                'db_table': 'staged_jobs',
                'managed': False,
            },
        ),
        ApplySchema("006_routes"),
    ]
