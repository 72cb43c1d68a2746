"""StagedJob: the relay's staged_jobs table, seen from Django; the SQL of stagedrain's migrations makes it."""
import uuid

from django.db import models
from django.utils import timezone

from stagedrain.ids import new_jid


class JSONTextField(models.JSONField):
    """A json column (Django's JSONField means jsonb), read as its text.

    psycopg2 decodes json values itself, which JSONField's from_db_value does
    not expect; selected as text, the value is decoded by JSONField as from jsonb.
    """

    def select_format(self, compiler, sql, params):
        return "(%s)::text" % sql, params


class StagedJob(models.Model):
    """One staged job. Django leaves id out of an INSERT (the app role may not set it);
    the other defaults mirror the columns' own, since Django writes every field."""

    id = models.BigAutoField(primary_key=True)
    queue = models.TextField(default="default")
    job_class = models.TextField()
    args = JSONTextField(default=list)
    run_at = models.DateTimeField(null=True, blank=True)
    options = JSONTextField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    jid = models.TextField(default=new_jid)
    uuid = models.UUIDField(default=uuid.uuid4)
    tenant = models.TextField(null=True, blank=True)
    route = models.TextField(null=True, blank=True)

    class Meta:
        managed = False
        db_table = "staged_jobs"

    def __str__(self):
        return "%s %s on %s" % (self.job_class, self.uuid, self.queue)
