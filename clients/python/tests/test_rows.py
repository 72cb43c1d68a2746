"""The rows StagedTask and stage() write, checked in the real Postgres as the superuser sees them.
No relay runs here: rows stay where the app put them."""
import unittest
import uuid
from datetime import datetime, timedelta, timezone

import support  # noqa: F401  (configures Django first)
import psycopg2
from celery import chain, group
from django.db import connection, transaction
from kombu.exceptions import EncodeError
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from stagedrain import NotMigrated, NotStageable
from stagedrain.celery import stage
from stagedrain.django.models import StagedJob
from stagedrain_test_app import add, app, record, routed

EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


class RowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.db = support.admin()

    @classmethod
    def tearDownClass(cls):
        cls.db.close()

    def setUp(self):
        support.clear(self.db)

    def rows(self):
        return support.rows(self.db)


class ColumnsTest(RowTest):
    def test_delay_writes_celerys_message_in_the_contracts_columns(self):
        with transaction.atomic():
            r = record.delay(1, "é", [2], k={"n": None})
        (row,) = self.rows()
        self.assertEqual(row["job_class"], "t.record")
        self.assertEqual(row["queue"], "celery")
        self.assertEqual(row["args"], [[1, "é", [2]], {"k": {"n": None}}, EMBED])
        self.assertIsNone(row["run_at"])
        self.assertIsNone(row["tenant"])
        self.assertRegex(row["jid"], r"^[0-9a-f]{24}$")
        self.assertEqual(row["uuid"], r.id)
        opts = row["options"]
        self.assertIs(opts["serialized"], True)
        self.assertLessEqual(set(opts), {"serialized", "headers", "priority", "reply_to"})
        h = opts["headers"]
        self.assertEqual((h["id"], h["root_id"], h["task"], h["lang"]), (r.id, r.id, "t.record", "py"))
        self.assertEqual(h["argsrepr"], "(1, 'é', [2])")
        self.assertEqual(h["kwargsrepr"], "{'k': {'n': None}}")
        self.assertIsNone(h["eta"])

    def test_apply_async_options_routing_and_times(self):
        eta = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
        before = datetime.now(timezone.utc)
        with transaction.atomic():
            a = record.apply_async((1,), countdown=30, priority=5)
            b = record.apply_async((2,), {"x": 1}, eta=eta, queue="other")
            c = routed.apply_async((3,))  # task_routes sends it to "routed"
            d = record.apply_async((4,), headers={"trace": "abc"}, expires=60, time_limit=9)
        ra, rb, rc, rd = self.rows()
        self.assertEqual([x["uuid"] for x in (ra, rb, rc, rd)], [a.id, b.id, c.id, d.id])
        self.assertEqual([x["queue"] for x in (ra, rb, rc, rd)], ["celery", "other", "routed", "celery"])
        self.assertTrue(before + timedelta(seconds=29) < ra["run_at"] < before + timedelta(seconds=40))
        self.assertEqual(datetime.fromisoformat(ra["options"]["headers"]["eta"]), ra["run_at"])
        self.assertEqual(ra["options"]["priority"], 5)
        self.assertEqual(rb["run_at"], eta)
        self.assertNotIn("priority", rb["options"])
        self.assertEqual(rb["args"][1], {"x": 1})
        self.assertEqual(rd["options"]["headers"]["trace"], "abc")
        self.assertEqual(rd["options"]["headers"]["timelimit"], [9, None])
        self.assertIsNotNone(rd["options"]["headers"]["expires"])
        self.assertIsNone(rd["run_at"])

    def test_group_and_chain_stage_their_first_messages(self):
        with transaction.atomic():
            g = group(record.s(1), record.s(2)).apply_async()
            c = chain(record.si(3), record.si(4)).apply_async()
        rows = self.rows()
        self.assertEqual([r["uuid"] for r in rows], [x.id for x in g.results] + [c.parent.id])  # a chain returns its last result
        self.assertEqual([r["args"][0] for r in rows], [[1], [2], [3]])
        self.assertEqual([s["args"] for s in rows[2]["args"][2]["chain"]], [[4]])
        self.assertEqual([r["options"]["headers"]["group"] for r in rows[:2]], [g.id, g.id])

    def test_args_are_the_text_kombu_wrote(self):
        # json keeps it as written: the keys in their order, 1e+16 and -0.0 as
        # Python spells them (json.loads reads each back as the same float).
        with transaction.atomic():
            record.delay({"zeta": 1, "alpha": {"b": 1, "a": 2}}, 1e16, -0.0, 1e-7, 0.1, 2**70, 1.7976931348623157e308)
        (row,) = self.rows()
        self.assertTrue(row["args_text"].startswith(
            '[[{"zeta": 1, "alpha": {"b": 1, "a": 2}}, 1e+16, -0.0, 1e-07, 0.1, 1180591620717411303424, '
            "1.7976931348623157e+308], {}, "), row["args_text"])
        got = row["args"][0]
        self.assertEqual(list(got[0]), ["zeta", "alpha"])
        self.assertEqual(list(got[0]["alpha"]), ["b", "a"])
        self.assertEqual(got[1:], [1e16, -0.0, 1e-7, 0.1, 2**70, 1.7976931348623157e308])
        self.assertEqual([type(x) for x in got[1:]], [float, float, float, float, int, float])
        self.assertEqual(str(got[2]), "-0.0")

    def test_nul_character_in_a_string_is_staged(self):
        # json holds it as the six characters \u0000, which the worker reads back as the character.
        with transaction.atomic():
            r = record.apply_async(("a\x00b", [{"x": "\x00"}]), {"k": "\x00"}, headers={"h": "\x00"})
            six = record.delay("a\\u0000 is six characters, not a NUL")
        one, two = self.rows()
        self.assertEqual((one["uuid"], two["uuid"]), (r.id, six.id))
        self.assertTrue(one["args_text"].startswith('[["a\\u0000b", [{"x": "\\u0000"}]], {"k": "\\u0000"}, '), one["args_text"])
        self.assertEqual(one["args"][:2], [["a\x00b", [{"x": "\x00"}]], {"k": "\x00"}])
        self.assertEqual(one["options"]["headers"]["h"], "\x00")
        self.assertEqual(two["args"][0], ["a\\u0000 is six characters, not a NUL"])

    def test_django_model_reads_the_row(self):
        with transaction.atomic():
            r = record.apply_async((5,), eta=datetime(2030, 1, 1, tzinfo=timezone.utc))
        job = StagedJob.objects.using("admin").get(uuid=uuid.UUID(r.id))
        self.assertEqual((job.job_class, job.queue, job.args[0]), ("t.record", "celery", [5]))
        self.assertEqual(job.run_at, datetime(2030, 1, 1, tzinfo=timezone.utc))
        self.assertTrue(job.options["serialized"])

    def test_django_model_writes_a_hand_written_row_as_the_app_role(self):
        # Django inserts with RETURNING id: roles.sql's default SELECT (id, uuid, jid).
        with transaction.atomic():
            job = StagedJob.objects.create(job_class="t.record", queue="celery", args=[7])
        (row,) = self.rows()
        self.assertEqual((row["id"], row["args"], row["options"]), (job.id, [7], {}))
        self.assertEqual((row["jid"], row["uuid"]), (job.jid, str(job.uuid)))

    def test_django_model_keeps_the_json_text(self):
        with transaction.atomic():
            job = StagedJob.objects.create(job_class="t.record", args=[{"zeta": 1, "alpha": 2}, 1e16, -0.0],
                                           options={"b": 1, "a": "\x00"})
        (row,) = self.rows()
        self.assertEqual((row["args_text"], row["options_text"]), ('[{"zeta": 1, "alpha": 2}, 1e+16, -0.0]', '{"b": 1, "a": "\\u0000"}'))
        back = StagedJob.objects.using("admin").get(id=job.id)
        self.assertEqual((list(back.args[0]), back.args[1:], list(back.options.items())),
                         (["zeta", "alpha"], [1e16, -0.0], [("b", 1), ("a", "\x00")]))
        self.assertEqual(StagedJob.objects.using("admin").filter(id=job.id).values_list("args__0__alpha", flat=True)[0], 2)


class TransactionTest(RowTest):
    def test_rolled_back_transaction_stages_nothing(self):
        with self.assertRaises(ZeroDivisionError):
            with transaction.atomic():
                record.delay(1)
                1 / 0
        self.assertEqual(self.rows(), [])

    def test_rolled_back_savepoint_takes_its_tasks_only(self):
        with transaction.atomic():
            a = record.delay("a")
            try:
                with transaction.atomic():
                    record.delay("b")
                    raise KeyError("b")
            except KeyError:
                pass
            c = record.delay("c")
        self.assertEqual([r["uuid"] for r in self.rows()], [a.id, c.id])

    def test_outside_a_transaction_the_row_commits_at_once(self):
        r = record.delay(1)
        self.assertEqual([x["uuid"] for x in self.rows()], [r.id])


class RefusedTest(RowTest):
    def test_unserializable_argument_raises_kombus_error_and_the_transaction_goes_on(self):
        with transaction.atomic():
            with self.assertRaises(EncodeError):
                record.delay(object())
            with self.assertRaises(EncodeError):
                record.delay(1, when={1, 2})
            ok = record.delay(2)  # nothing reached Postgres: the transaction is intact
        self.assertEqual([r["uuid"] for r in self.rows()], [ok.id])

    def test_nan_and_infinity_raise_not_stageable_and_the_transaction_goes_on(self):
        # Python's json writes them, but they are not JSON: Postgres' json refuses them.
        with transaction.atomic():
            for bad in (float("nan"), float("inf"), float("-inf")):
                with self.assertRaisesRegex(NotStageable, "task arguments: (NaN|-?Infinity) is not a JSON number"):
                    record.delay([bad])
            with self.assertRaisesRegex(NotStageable, "task headers: NaN"):
                record.apply_async((1,), headers={"h": float("nan")})
            ok = record.delay("NaN", "-Infinity", {"Infinity": 1})  # in strings they are text
        (row,) = self.rows()
        self.assertEqual(row["uuid"], ok.id)
        self.assertEqual(row["args"][0], ["NaN", "-Infinity", {"Infinity": 1}])

    def test_what_the_relay_cannot_push_as_sent_raises_not_stageable(self):
        with transaction.atomic():
            with self.assertRaisesRegex(NotStageable, "task_serializer = 'json'"):
                record.apply_async((1,), serializer="pickle")
            with self.assertRaisesRegex(NotStageable, "task_compression"):
                record.apply_async((1,), compression="zlib")
            with self.assertRaisesRegex(NotStageable, "exchange 'events'"):
                record.apply_async((1,), exchange="events", routing_key="order.paid")
        self.assertEqual(self.rows(), [])

    def test_missing_table_raises_not_migrated(self):
        # A search_path without staged_jobs, for this transaction only.
        with self.assertRaisesRegex(NotMigrated, "stagedrain migrate"):
            with transaction.atomic():
                with connection.cursor() as cur:
                    cur.execute("SET LOCAL search_path TO pg_catalog")
                record.delay(1)
        self.assertEqual(self.rows(), [])

    def test_database_never_migrated_raises_not_migrated(self):
        with self.db.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS never_migrated")
            cur.execute("CREATE DATABASE never_migrated")
        conn = psycopg2.connect(support.ADMIN_URL.rsplit("/", 1)[0] + "/never_migrated")
        try:
            with self.assertRaisesRegex(NotMigrated, r"run `stagedrain migrate`") as cm:
                stage("t.record", [1], connection=conn, app=app)
            self.assertEqual(cm.exception.__cause__.pgcode, "42P01")
        finally:
            conn.close()

    def test_eager_tasks_run_here_and_stage_nothing(self):
        app.conf.task_always_eager = True
        try:
            self.assertEqual(add.delay(2, 3).get(), 5)
            self.assertEqual(add.apply_async((4, 5)).get(), 9)
        finally:
            app.conf.task_always_eager = False
        self.assertEqual(self.rows(), [])


class PlainStageTest(RowTest):
    def test_psycopg2_connection_stages_in_its_transaction(self):
        conn = psycopg2.connect(support.APP_URL)
        try:
            stage("t.record", [1], connection=conn, app=app)
            conn.rollback()
            self.assertEqual(self.rows(), [])
            r = stage("t.record", [2], {"k": "v"}, connection=conn, app=app, countdown=10, queue="q2")
            self.assertEqual(self.rows(), [])  # not committed yet
            conn.commit()
        finally:
            conn.close()
        (row,) = self.rows()
        self.assertEqual((row["uuid"], row["queue"], row["args"][:2]), (r.id, "q2", [[2], {"k": "v"}]))
        self.assertIsNotNone(row["run_at"])

    def test_sqlalchemy_session_and_connection_stage_in_their_transaction(self):
        engine = create_engine(support.APP_URL, future=True)
        try:
            with Session(engine) as s:
                stage("t.record", [1], connection=s, app=app)
                s.rollback()
            with Session(engine) as s, s.begin():
                a = stage("t.record", [2], connection=s, app=app)
            with engine.connect() as c:
                with c.begin():
                    b = stage("t.record", [3], connection=c, app=app)
                with c.begin():
                    stage("t.record", [4], connection=c, app=app)
                    c.get_transaction().rollback()
            with self.assertRaisesRegex(TypeError, "not an Engine"):
                stage("t.record", [5], connection=engine, app=app)
        finally:
            engine.dispose()
        self.assertEqual([(r["uuid"], r["args"][0]) for r in self.rows()], [(a.id, [2]), (b.id, [3])])


if __name__ == "__main__":
    unittest.main()
