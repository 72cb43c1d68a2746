"""ApplySchema: the migration operation that runs stagedrain's SQL files, as `stagedrain migrate` does."""
from django.db import router
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.operations.base import Operation

from stagedrain import schema


class ApplySchema(Operation):
    """Applies stagedrain's migrations up to and including `through` (e.g. "008_leader"),
    skipping those stagedrain_migrations records, in the Django migration's transaction.

    A later schema change is one more Django migration naming its last file.
    """

    # sqlmigrate prints a note instead of running it: which files apply
    # depends on what the database has.
    reduces_to_sql = False
    # Reversing raises, with the reason, rather than Django's bare "not reversible".
    reversible = True

    def __init__(self, through):
        self.through = through

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        conn = schema_editor.connection
        # Like django.contrib.postgres' operations: other databases (and those a
        # router keeps the app out of) get nothing; the tables are Postgres'.
        if conn.vendor != "postgresql" or not router.allow_migrate(conn.alias, app_label):
            return
        with conn.cursor() as cur:
            schema.apply(cur, self.through)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        raise IrreversibleError(
            "stagedrain's tables are not dropped by a migration: staged_jobs holds jobs not yet relayed, "
            "and dropping it loses them. Drain it (stagedrain status), then drop the tables by hand if you mean to."
        )

    def describe(self):
        return "Apply stagedrain's SQL migrations through %s" % self.through
