"""Writes one staged_jobs row through the caller's own connection, in its current transaction."""
from stagedrain.errors import not_migrated
from stagedrain.ids import new_jid

# Never id: the app role may not choose it, and its default orders the drain.
_COLUMNS = "queue, job_class, args, run_at, options, jid, uuid"
_DBAPI = "INSERT INTO staged_jobs (%s) VALUES (%%s, %%s, %%s::json, %%s, %%s::json, %%s, %%s::uuid)" % _COLUMNS
_NAMED = (
    "INSERT INTO staged_jobs (%s) VALUES (:queue, :job_class, CAST(:args AS json), :run_at, "
    "CAST(:options AS json), :jid, CAST(:uuid AS uuid))" % _COLUMNS
)


def _sqlalchemy_execute(conn, params):
    from sqlalchemy import text
    from sqlalchemy.engine import Engine

    if isinstance(conn, Engine):
        # engine.execute would run in a transaction of its own, committed at once.
        raise TypeError("stage through a Session or a Connection inside your transaction, not an Engine")
    conn.execute(text(_NAMED), params)


def insert(conn, row):
    """INSERT row (message.build_row's dict) through conn: a DB-API connection
    (psycopg2, Django's django.db.connection) or an SQLAlchemy Session/Connection."""
    params = dict(row, jid=new_jid())
    try:
        if hasattr(conn, "cursor"):
            with conn.cursor() as cur:
                cur.execute(
                    _DBAPI,
                    [params[k] for k in ("queue", "job_class", "args", "run_at", "options", "jid", "uuid")],
                )
        else:
            _sqlalchemy_execute(conn, params)
    except Exception as exc:
        missing = not_migrated(exc)
        if missing is not None:
            raise missing from exc
        raise
    return params["jid"]
