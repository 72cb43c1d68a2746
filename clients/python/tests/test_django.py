"""The Django side, in a project `django-admin startproject` made, with the installed package:
its migration (alone, and before or after `stagedrain migrate`), the app's own `manage.py test`,
`manage.py stagedrain_status`, and the SQL files pip installed."""
import os
import shutil
import subprocess
import unittest
import uuid

import psycopg2

import support

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SITE = os.path.join(os.environ["TEST_DIR"], "python-site")  # where tests/run installed the package
PROJECT = os.path.join(os.environ["TEST_DIR"], "django-project")
PY = "/usr/bin/python3"
RELAY = os.environ["STAGEDRAIN_BIN"]
NAMES = ["001_staged_jobs", "002_cursor", "003_dead_letter_key", "004_job_uuid", "005_tenants_and_held", "006_routes",
         "007_json_payload", "008_leader"]


def setUpModule():
    """A fresh project and app, made the ordinary way, with the files a user adds."""
    shutil.rmtree(PROJECT, ignore_errors=True)
    os.makedirs(PROJECT)
    subprocess.run([PY, "-m", "django", "startproject", "proj", PROJECT], check=True)
    subprocess.run([PY, "manage.py", "startapp", "shop"], cwd=PROJECT, check=True, env=_env())
    src = os.path.join(HERE, "django_app")
    for rel in ("proj/__init__.py", "proj/celery.py", "shop/tasks.py", "shop/tests.py"):
        shutil.copyfile(os.path.join(src, rel), os.path.join(PROJECT, rel))
    with open(os.path.join(src, "settings_tail.py")) as tail, open(os.path.join(PROJECT, "proj/settings.py"), "a") as s:
        s.write(tail.read())


def _env(**extra):
    """The environment manage.py runs in: the installed package only, no STAGEDRAIN_* of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDRAIN_")}
    env.update(PYTHONPATH=SITE, DATABASE_URL="postgresql://unset/unset")
    env.update(extra)
    return env


def manage(*args, env=None):
    """manage.py ARGS in the project: the finished process (never raises on its status)."""
    return subprocess.run([PY, "manage.py", *args], cwd=PROJECT, env=env or _env(), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)


def fresh_database(test):
    """A new empty database for test, dropped when it ends; its superuser URL."""
    name = "dj_" + uuid.uuid4().hex[:12]
    conn = support.admin()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE " + name)

    def drop():
        with conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name)
        conn.close()

    test.addCleanup(drop)
    return support.ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def query(url, sql, params=None):
    conn = psycopg2.connect(url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def ledger(url):
    return query(url, "SELECT name, applied_at FROM stagedrain_migrations ORDER BY name")


def relay_migrate(url):
    out = subprocess.run([RELAY, "migrate", "--pg-url", url], text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=60)
    assert out.returncode == 0, out.stdout
    return out.stdout


class PackageTest(unittest.TestCase):
    def test_the_installed_package_holds_the_migrations_sql_as_files(self):
        installed = os.path.join(SITE, "stagedrain", "sql")
        self.assertFalse(os.path.islink(installed), "pip installed the symlink, not the files")
        self.assertEqual(sorted(os.listdir(installed)), [n + ".sql" for n in NAMES])  # no roles.sql, embed.sh
        for n in NAMES:
            path = os.path.join(installed, n + ".sql")
            self.assertFalse(os.path.islink(path))
            with open(path, "rb") as got, open(os.path.join(REPO, "sql", n + ".sql"), "rb") as want:
                self.assertEqual(got.read(), want.read(), n)

    def test_the_source_links_to_the_repositorys_sql_directory(self):
        link = os.path.join(REPO, "clients", "python", "stagedrain", "sql")
        self.assertEqual(os.readlink(link), "../../../sql")  # relative: it works in any checkout


class MigrationTest(unittest.TestCase):
    def migrate(self, url, *args):
        out = manage("migrate", *args, env=_env(DATABASE_URL=url))
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def test_django_migrate_makes_the_tables_and_stagedrain_migrate_then_does_nothing(self):
        url = fresh_database(self)
        out = self.migrate(url)
        self.assertIn("Applying stagedrain.0001_initial... OK", out)
        self.assertIn("Applying stagedrain.0002_json_payload... OK", out)
        self.assertIn("Applying stagedrain.0003_leader... OK", out)
        before = ledger(url)
        self.assertEqual([n for n, _ in before], NAMES)
        cols = query(url, "SELECT column_name FROM information_schema.columns WHERE table_name = 'staged_jobs'")
        self.assertIn(("route",), cols)  # 006 ran
        self.assertEqual(query(url, "SELECT to_regclass('staged_jobs_leader')::text"), [("staged_jobs_leader",)])  # 008
        log = relay_migrate(url)
        self.assertEqual(log.count('msg="migration already applied"'), len(NAMES), log)
        self.assertEqual(ledger(url), before)

    def test_stagedrain_migrate_then_django_migrate_applies_nothing_twice(self):
        url = fresh_database(self)
        relay_migrate(url)
        before = ledger(url)
        self.migrate(url)
        self.assertEqual(ledger(url), before)
        self.assertEqual(query(url, "SELECT name FROM django_migrations WHERE app = 'stagedrain' ORDER BY name"),
                         [("0001_initial",), ("0002_json_payload",), ("0003_leader",)])

    def test_an_app_migrated_through_0001_gets_json_columns_from_0002(self):
        # An app that ran this package's first migration (jsonb columns), then updated it.
        url = fresh_database(self)
        self.migrate(url, "stagedrain", "0001_initial")
        types = "SELECT data_type FROM information_schema.columns WHERE table_name = %s AND column_name IN ('args', 'options')"
        self.assertEqual([n for n, _ in ledger(url)], NAMES[:6])
        self.assertEqual(query(url, types, ["staged_jobs"]), [("jsonb",), ("jsonb",)])
        out = self.migrate(url)
        self.assertIn("Applying stagedrain.0002_json_payload... OK", out)
        self.assertEqual([n for n, _ in ledger(url)], NAMES)
        for table in ("staged_jobs", "staged_jobs_dead", "staged_jobs_held"):
            self.assertEqual(query(url, types, [table]), [("json",), ("json",)], table)

    def test_an_app_migrated_through_0002_gets_the_leader_table_from_0003(self):
        # An app that ran this package's migrations before 008 (the relay warns
        # without staged_jobs_leader), then updated it.
        url = fresh_database(self)
        leader = "SELECT to_regclass('staged_jobs_leader')::text"
        self.migrate(url, "stagedrain", "0002_json_payload")
        self.assertEqual([n for n, _ in ledger(url)], NAMES[:7])
        self.assertEqual(query(url, leader), [(None,)])
        out = self.migrate(url)
        self.assertIn("Applying stagedrain.0003_leader... OK", out)
        self.assertNotIn("0002_json_payload", out)
        self.assertEqual([n for n, _ in ledger(url)], NAMES)
        self.assertEqual(query(url, leader), [("staged_jobs_leader",)])

    def test_django_migrate_applies_only_the_files_the_ledger_lacks(self):
        url = fresh_database(self)
        relay_migrate(url)
        query(url, "DELETE FROM stagedrain_migrations WHERE name >= '004'")
        kept = ledger(url)
        self.migrate(url)
        after = ledger(url)
        self.assertEqual(after[:3], kept)
        self.assertEqual([n for n, _ in after[3:]], NAMES[3:])
        self.assertTrue(all(t > kept[-1][1] for _, t in after[3:]))

    def test_migrating_back_is_refused_and_the_tables_stay(self):
        url = fresh_database(self)
        self.migrate(url)
        query(url, "INSERT INTO staged_jobs (job_class) VALUES ('t.kept')")
        out = manage("migrate", "stagedrain", "zero", env=_env(DATABASE_URL=url))
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("IrreversibleError: stagedrain's tables are not dropped", out.stderr)
        self.assertEqual(query(url, "SELECT job_class FROM staged_jobs"), [("t.kept",)])
        self.assertEqual(query(url, "SELECT count(*) FROM django_migrations WHERE app = 'stagedrain'"), [(3,)])

    def test_the_models_state_matches_the_migration(self):
        out = manage("makemigrations", "--check", "--dry-run", "stagedrain", env=_env(DATABASE_URL=fresh_database(self)))
        self.assertEqual((out.returncode, out.stdout.strip()), (0, "No changes detected in app 'stagedrain'"), out.stderr)

    def test_another_database_engine_gets_nothing(self):
        path = os.path.join(os.environ["TEST_DIR"], "django.sqlite3")
        self.addCleanup(lambda: os.path.exists(path) and os.remove(path))
        self.migrate("sqlite://" + path)

    def test_the_apps_test_suite_gets_the_table_in_its_test_database(self):
        # The issue: `manage.py test` failed with NotMigrated (no staged_jobs in test_<name>).
        out = manage("test", "shop", "-v", "2", "--noinput", env=_env(DATABASE_URL=fresh_database(self)))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("Applying stagedrain.0001_initial... OK", out.stdout)  # in test_<name>
        self.assertIn("Applying stagedrain.0002_json_payload... OK", out.stdout)
        self.assertIn("Applying stagedrain.0003_leader... OK", out.stdout)
        self.assertRegex(out.stderr, r"Ran 2 tests in [0-9.]+s\n\nOK")


class SchemaTest(unittest.TestCase):
    """stagedrain.schema.apply, which the migration runs, on a psycopg2 cursor."""

    def test_it_applies_up_to_the_named_migration_only(self):
        # A later Django migration names a later file: each applies its own share.
        from stagedrain import schema

        url = fresh_database(self)
        conn = psycopg2.connect(url)
        self.addCleanup(conn.close)
        with conn, conn.cursor() as cur:
            self.assertEqual(schema.apply(cur, "003_dead_letter_key"), NAMES[:3])
        self.assertEqual([n for n, _ in ledger(url)], NAMES[:3])
        with conn, conn.cursor() as cur:
            self.assertEqual(schema.apply(cur, "008_leader"), NAMES[3:])
            self.assertEqual(schema.apply(cur, "008_leader"), [])

    def test_an_unknown_name_is_refused_before_anything_runs(self):
        from stagedrain import schema

        url = fresh_database(self)
        conn = psycopg2.connect(url)
        self.addCleanup(conn.close)
        with self.assertRaisesRegex(RuntimeError, r"no stagedrain migration named '009_nope' in .*/stagedrain/sql"):
            with conn, conn.cursor() as cur:
                schema.apply(cur, "009_nope")
        self.assertEqual(query(url, "SELECT to_regclass('stagedrain_migrations')"), [(None,)])

    def test_a_package_without_its_sql_files_says_so(self):
        from stagedrain import schema

        with self.assertRaisesRegex(RuntimeError, r"SQL files are missing from /nonexistent: reinstall the package"):
            schema.migrations("/nonexistent")

    def test_django_migrate_waits_for_a_stagedrain_migrate_in_progress(self):
        # The worst order, by hand: another applier holds the lock with its
        # tables created but not committed; Django's migrate must wait, then
        # find every file recorded and apply none again.
        from stagedrain import schema

        url = fresh_database(self)
        first = psycopg2.connect(url)
        self.addCleanup(first.close)
        cur = first.cursor()
        schema.apply(cur, "008_leader")  # the transaction stays open
        env = _env(DATABASE_URL=url)
        second = subprocess.Popen([PY, "manage.py", "migrate"], cwd=PROJECT, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: second.poll() is None and second.kill())
        support.wait_for("Django's migrate to wait for the lock", lambda: query(
            url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0][0] == 1)
        first.commit()
        self.assertEqual(second.wait(60), 0, second.stdout.read())
        self.assertEqual(len({t for _, t in ledger(url)}), 1)  # one transaction applied them all
        self.assertEqual([n for n, _ in ledger(url)], NAMES)


class StatusCommandTest(unittest.TestCase):
    """manage.py stagedrain_status against a database Django migrated, and a Redis database of its own."""

    def setUp(self):
        self.url = fresh_database(self)
        out = manage("migrate", env=_env(DATABASE_URL=self.url))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.redis_url = os.environ["TEST_REDIS_URL"].rsplit("/", 1)[0] + "/5"
        subprocess.run(["redis-cli", "-u", self.redis_url, "FLUSHDB"], check=True, stdout=subprocess.DEVNULL)

    def status(self, *args, **env):
        base = dict(STAGEDRAIN_BIN=RELAY, STAGEDRAIN_PG_URL=self.url, STAGEDRAIN_REDIS_URL=self.redis_url,
                    STAGEDRAIN_FORMAT="celery")
        base.update(env)
        return manage("stagedrain_status", *args, env=_env(**{k: v for k, v in base.items() if v is not None}))

    def test_no_relay_running_needs_attention_and_exits_1(self):
        query(self.url, "INSERT INTO staged_jobs (job_class) VALUES ('t.a'), ('t.b')")
        out = self.status()
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertEqual(out.stdout.splitlines(), [
            "backlog   2 staged",
            "dead      0 rows",
            "needs attention:",
            "  - no relay holds the leader lock",
        ])

    def test_healthy_while_a_relay_runs_exits_0(self):
        log = open(os.path.join(os.environ["TEST_DIR"], "status-relay.log"), "ab")
        self.addCleanup(log.close)
        relay = subprocess.Popen([RELAY, "run", "--pg-url", self.url, "--redis-url", self.redis_url, "--format",
                                  "celery", "--poll-interval", "50ms"], stdout=log, stderr=subprocess.STDOUT)

        def stop():
            relay.terminate()
            relay.wait(30)

        self.addCleanup(stop)
        query(self.url, "INSERT INTO staged_jobs (job_class) VALUES ('t.a')")

        def healthy_and_drained():
            out = self.status("--", "--max-age", "1h")
            return out if out.returncode == 0 and "backlog   0 staged" in out.stdout else None

        out = support.wait_for("a healthy status with the row relayed", healthy_and_drained, timeout=60)
        self.assertEqual(out.stdout.splitlines(), ["backlog   0 staged", "dead      0 rows", "healthy"])

    def test_arguments_after_two_dashes_go_to_status(self):
        out = self.status("--", "--max-age", "soon")
        self.assertEqual((out.returncode, out.stdout), (2, ""))
        self.assertEqual(len(out.stderr.splitlines()), 1, out.stderr)
        self.assertIn("soon", out.stderr)

    def test_the_relay_on_path_when_stagedrain_bin_is_unset(self):
        bindir = os.path.join(os.environ["TEST_DIR"], "status-bin")
        os.makedirs(bindir, exist_ok=True)
        if not os.path.lexists(os.path.join(bindir, "stagedrain")):
            os.symlink(RELAY, os.path.join(bindir, "stagedrain"))
        out = self.status(STAGEDRAIN_BIN=None, PATH=bindir + os.pathsep + os.environ["PATH"])
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("needs attention:", out.stdout)

    def test_no_relay_binary_is_a_clear_error(self):
        out = self.status(STAGEDRAIN_BIN=None, PATH="/nonexistent")
        self.assertEqual(out.returncode, 2)
        self.assertRegex(out.stderr, r"relay binary was not found: set STAGEDRAIN_BIN .* or put stagedrain on PATH")

    def test_summary_of_a_status_that_could_not_read_everything(self):
        from stagedrain.django.management.commands.stagedrain_status import summary

        lines = summary({"healthy": False, "problems": ["a", "b"], "backlog": None, "dead": None})
        self.assertEqual(lines, ["backlog   unknown", "dead      unknown", "needs attention:", "  - a", "  - b"])
        lines = summary({"healthy": True, "problems": [], "backlog": {"staged": 1234567, "estimated": True,
                                                                      "held": 3}, "dead": {"rows": 1}})
        self.assertEqual(lines, ["backlog   about 1,234,567 staged, 3 held", "dead      1 row", "healthy"])


if __name__ == "__main__":
    unittest.main()
