# stagedrain's 007_json_payload: args and options become json, which keeps the
# text kombu's json wrote (key order, number spelling, \u0000). The model's
# fields follow (state only: the model is unmanaged).

from django.db import migrations

import stagedrain.django.models
from stagedrain.django.operations import ApplySchema


class Migration(migrations.Migration):

    dependencies = [
        ('stagedrain', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='stagedjob',
            name='args',
            field=stagedrain.django.models.JSONTextField(default=list),
        ),
        migrations.AlterField(
            model_name='stagedjob',
            name='options',
            field=stagedrain.django.models.JSONTextField(default=dict),
        ),
        ApplySchema("007_json_payload"),
    ]
