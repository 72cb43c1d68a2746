"""What every test module shares: Django configured on the harness's Postgres as the
app role, the superuser's view of staged_jobs, and deadlines instead of sleeps."""
import os
import time
from urllib.parse import urlsplit

import django
import psycopg2
from django.conf import settings

ADMIN_URL = os.environ["TEST_PG_URL"]  # the superuser: reads and clears what the app staged
APP_URL = os.environ["TEST_APP_PG_URL"]  # a LOGIN role in group stagedrain_app: INSERT only


def _django_db(url):
    u = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": u.path.lstrip("/"),
        "USER": u.username,
        "PASSWORD": u.password or "",
        "HOST": u.hostname,
        "PORT": str(u.port),
    }


if not settings.configured:
    settings.configure(
        DATABASES={"default": _django_db(APP_URL), "admin": _django_db(ADMIN_URL)},
        INSTALLED_APPS=["stagedrain.django"],
        USE_TZ=True,
        TIME_ZONE="UTC",
    )
    django.setup()


def admin():
    """A superuser connection in autocommit."""
    conn = psycopg2.connect(ADMIN_URL)
    conn.autocommit = True
    return conn


def rows(conn):
    """Every staged row, in staging order, as dicts; args_text and options_text as the json columns hold them."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT id, queue, job_class, args, run_at, options, jid, uuid::text AS uuid, tenant, created_at,"
            " args::text AS args_text, options::text AS options_text FROM staged_jobs ORDER BY id"
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def clear(conn):
    with conn.cursor() as cur:
        cur.execute("DELETE FROM staged_jobs")


def wait_for(what, cond, timeout=60.0, every=0.05):
    """cond()'s first truthy value within timeout seconds, else AssertionError naming what."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(every)
