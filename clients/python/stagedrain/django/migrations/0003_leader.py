# stagedrain's 008_leader: the table staged_jobs_leader, where each relay
# leader records a digest of its targets and route rules. The relay reads and
# writes it; the model does not change.

from django.db import migrations

from stagedrain.django.operations import ApplySchema


class Migration(migrations.Migration):

    dependencies = [
        ('stagedrain', '0002_json_payload'),
    ]

    operations = [
        ApplySchema("008_leader"),
    ]
