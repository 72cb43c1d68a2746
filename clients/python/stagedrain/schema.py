"""stagedrain's schema, applied as `stagedrain migrate` applies it, from the SQL files this package ships."""
import os
import re

# The package's sql/ is a symlink to the repository's sql/ (pip installs the
# files it points at): one source of truth with the relay, which compiles the
# same files in. roles.sql and notify.sql are not migrations.
SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")
_MIGRATION = re.compile(r"^([0-9]{3}_[a-z0-9_]+)\.sql$")

# The same statements, in the same order, as the relay's migrate.c: two
# appliers at once (the relay's and a framework's) wait for each other.
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('stagedrain migrate'))"
_LEDGER = (
    "CREATE TABLE IF NOT EXISTS stagedrain_migrations ("
    " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
)


def migrations(sql_dir=SQL_DIR):
    """[(name, path)] of the shipped migrations, in name order."""
    try:
        files = os.listdir(sql_dir)
    except FileNotFoundError:
        raise RuntimeError(
            "stagedrain's SQL files are missing from %s: reinstall the package from a checkout of "
            "stagedrain (its stagedrain/sql links to the repository's sql/)" % sql_dir
        ) from None
    found = (_MIGRATION.match(f) for f in files)
    return sorted((m.group(1), os.path.join(sql_dir, m.group(0))) for m in found if m)


def apply(cursor, through, sql_dir=SQL_DIR):
    """Apply every migration up to and including `through` that stagedrain_migrations lacks.

    cursor is a DB-API cursor inside the caller's transaction (a framework
    migration's): nothing here commits. Returns the names it applied.
    """
    todo = [(name, path) for name, path in migrations(sql_dir) if name <= through]
    if not todo or todo[-1][0] != through:
        raise RuntimeError("no stagedrain migration named %r in %s" % (through, sql_dir))
    cursor.execute(_LOCK)
    cursor.execute(_LEDGER)
    applied = []
    for name, path in todo:
        cursor.execute("SELECT 1 FROM stagedrain_migrations WHERE name = %s", [name])
        if cursor.fetchone():
            continue
        with open(path, encoding="utf-8") as f:
            sql = f.read()
        # No parameters: the driver sends the file as it is, every statement.
        cursor.execute(sql)
        cursor.execute("INSERT INTO stagedrain_migrations (name) VALUES (%s)", [name])
        applied.append(name)
    return applied
