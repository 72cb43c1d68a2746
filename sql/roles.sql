-- stagedrain roles: least privilege for the relay, for the applications that
-- stage jobs, and for the people who look after dead-lettered ones. Not a migration (`stagedrain migrate` does not run it): an
-- admin runs it, after `stagedrain migrate`, in the database that holds
-- staged_jobs:
--
--   psql -X -v ON_ERROR_STOP=1 -d app -f sql/roles.sql
--
-- Who may run it: a superuser, or a role with CREATEROLE that owns the tables
-- (the roles it creates are cluster-wide). The tables' owner without
-- CREATEROLE (a managed database's usual app owner) can run it once the three
-- group roles exist: someone with CREATEROLE runs
--   CREATE ROLE stagedrain_relay NOLOGIN; CREATE ROLE stagedrain_app NOLOGIN;
--   CREATE ROLE stagedrain_admin NOLOGIN;
-- and the owner then runs this script, which only grants. Without them it
-- stops with that advice before it changes anything.
--
-- It creates three NOLOGIN group roles and grants them exactly:
--
--   stagedrain_relay  SELECT, DELETE on staged_jobs; INSERT on staged_jobs_dead,
--                     and SELECT on its dead_id, id, queue, job_class,
--                     reason and failed_at (the dead-letter warning reads
--                     them back; the watcher counts dead rows by queue);
--                     SELECT, INSERT, DELETE on staged_jobs_held;
--                     SELECT on the id sequence and the held table's
--                     hold_id sequence (their last values, never nextval)
--   stagedrain_app    INSERT on staged_jobs' columns other than id (queue,
--                     job_class, args, run_at, options, created_at, jid,
--                     uuid, tenant, route);
--                     SELECT on its id, uuid and jid columns, so an ORM's
--                     INSERT ... RETURNING id (ActiveRecord's create!,
--                     Django's objects.create) works, and on queue, so a
--                     queue driver's size() (Laravel's) counts a queue's
--                     staged rows; it shows job ids and queue names and
--                     nothing else of the jobs;
--                     USAGE on its id sequence
--   stagedrain_admin  what `stagedrain dead` needs: SELECT, DELETE on
--                     staged_jobs_dead (list, show, purge, and replay,
--                     which claims a row by deleting it); INSERT on
--                     staged_jobs' columns other than id, as the app, and
--                     SELECT on its id (replay prints the new ids); USAGE
--                     on its id sequence; and for `stagedrain held`:
--                     SELECT, DELETE on staged_jobs_held, INSERT on
--                     staged_jobs_dead. It cannot read staged jobs.
--
-- and nothing else: each run first revokes whatever these three roles hold on
-- those objects, so running it again (safe at any time) restores exactly this.
-- The relay's leader lock is pg_advisory_lock, which every role may call
-- (unless an admin revoked EXECUTE from PUBLIC); CONNECT on the database and
-- USAGE on the schema are PUBLIC's by default too (the schema is granted below
-- if not).
--
-- Give the groups to the roles that log in (they must INHERIT, the default):
--
--   CREATE ROLE relay LOGIN PASSWORD '...' IN ROLE stagedrain_relay;
--   GRANT stagedrain_app TO rails;          -- an existing application role
--   GRANT stagedrain_admin TO alice;        -- a person who replays dead jobs
--
-- The id must come from its default: an id chosen by the application (or a
-- replay) can
-- fall below ids the relay has already passed, and that job may never be
-- delivered. So an INSERT that names id (or names no columns at all) is
-- refused with "permission denied"; list the columns, as ORMs do when the id
-- is unset.
--
-- Apps that never read back what they inserted can drop the SELECT on id,
-- uuid, jid and queue: run with -v app_returning_id=off.

DO $$
BEGIN
    IF (NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stagedrain_relay')
        OR NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stagedrain_app')
        OR NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stagedrain_admin'))
       AND NOT (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'roles.sql must create the group roles stagedrain_relay, stagedrain_app and stagedrain_admin, which needs a superuser or CREATEROLE, and % has neither', current_user
            USING HINT = 'have a role with CREATEROLE run: CREATE ROLE stagedrain_relay NOLOGIN; CREATE ROLE stagedrain_app NOLOGIN; CREATE ROLE stagedrain_admin NOLOGIN; then run roles.sql again as the owner of staged_jobs';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stagedrain_relay') THEN
        CREATE ROLE stagedrain_relay NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stagedrain_app') THEN
        CREATE ROLE stagedrain_app NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stagedrain_admin') THEN
        CREATE ROLE stagedrain_admin NOLOGIN;
    END IF;
END
$$;

DO $$
DECLARE
    jobs regclass := to_regclass('staged_jobs');
    dead regclass := to_regclass('staged_jobs_dead');
    held regclass := to_regclass('staged_jobs_held');
    leader regclass := to_regclass('staged_jobs_leader');
    seq text;
    held_seq text;
    nsp name;
BEGIN
    IF jobs IS NULL OR dead IS NULL OR held IS NULL THEN
        RAISE EXCEPTION 'staged_jobs, staged_jobs_dead or staged_jobs_held is not on the search_path'
            USING HINT = 'run `stagedrain migrate` first, in this database';
    END IF;
    seq := pg_get_serial_sequence(jobs::text, 'id');
    held_seq := pg_get_serial_sequence(held::text, 'hold_id');
    SELECT relnamespace::regnamespace::name INTO nsp FROM pg_class WHERE oid = jobs;

    -- Revoking a table's privileges also revokes its column privileges.
    EXECUTE format('REVOKE ALL ON TABLE %s, %s, %s FROM stagedrain_relay, stagedrain_app, stagedrain_admin',
                   jobs, dead, held);
    EXECUTE format('REVOKE ALL ON SEQUENCE %s, %s FROM stagedrain_relay, stagedrain_app, stagedrain_admin',
                   seq, held_seq);

    IF NOT has_schema_privilege('stagedrain_relay', nsp, 'USAGE')
       OR NOT has_schema_privilege('stagedrain_app', nsp, 'USAGE')
       OR NOT has_schema_privilege('stagedrain_admin', nsp, 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO stagedrain_relay, stagedrain_app, stagedrain_admin', nsp);
    END IF;
    -- The relay reads batches, deletes what it pushed (the fence's delete and
    -- the dead-letter move read id and jid, hence SELECT), and moves rows that
    -- cannot be jobs into staged_jobs_dead.
    EXECUTE format('GRANT SELECT, DELETE ON TABLE %s TO stagedrain_relay', jobs);
    EXECUTE format('GRANT INSERT ON TABLE %s TO stagedrain_relay', dead);
    -- Its warning names each row it moved there by dead_id, queue and class
    -- (INSERT ... RETURNING reads them), and its watcher gauges dead rows by
    -- queue and the oldest one's age (stagedrain_dead_jobs); not args or options.
    EXECUTE format('GRANT SELECT (dead_id, id, queue, job_class, reason, failed_at) ON TABLE %s TO stagedrain_relay',
                   dead);
    -- A capped queue's jobs wait in staged_jobs_held, which only the relay
    -- writes; a new leader reads the hold sequence's last value so the
    -- rounds it assigns sort after every row released before it.
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON TABLE %s TO stagedrain_relay', held);
    EXECUTE format('GRANT SELECT ON SEQUENCE %s TO stagedrain_relay', held_seq);
    -- A new leader reads what the last one routed by, and records its own
    -- (migration 008; a schema made by a framework's migration may lack it).
    IF leader IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE %s FROM stagedrain_relay, stagedrain_app, stagedrain_admin', leader);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON TABLE %s TO stagedrain_relay', leader);
    END IF;
    -- A new leader whose first read finds nothing moves its cursor to the
    -- sequence's last value instead of walking drained rows on every read.
    EXECUTE format('GRANT SELECT ON SEQUENCE %s TO stagedrain_relay', seq);
    -- Applications only add rows, and never choose their id: an explicit id
    -- below the relay's cursor would never be delivered. Column privileges
    -- make Postgres refuse it; the id's default needs only the sequence.
    EXECUTE format('GRANT INSERT (queue, job_class, args, run_at, options, created_at, jid, uuid, tenant,'
                   ' route) ON TABLE %s TO stagedrain_app', jobs);
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO stagedrain_app', seq);
    -- `stagedrain dead` reads the dead rows, and deletes them to purge or to
    -- claim them for a replay (DELETE ... RETURNING: a second replay of the
    -- same row then finds it gone; SELECT ... FOR UPDATE would need UPDATE).
    -- A replayed row goes back as an application stages one, its id from the
    -- default; the new id is read back to print it.
    EXECUTE format('GRANT SELECT, DELETE ON TABLE %s TO stagedrain_admin', dead);
    EXECUTE format('GRANT INSERT (queue, job_class, args, run_at, options, created_at, jid, uuid, tenant,'
                   ' route), SELECT (id) ON TABLE %s TO stagedrain_admin', jobs);
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO stagedrain_admin', seq);
    -- `stagedrain held` lists the held rows, and claims those of a target
    -- no route has now (DELETE ... RETURNING) to stage them again or to
    -- move them to the dead table.
    EXECUTE format('GRANT SELECT, DELETE ON TABLE %s TO stagedrain_admin', held);
    EXECUTE format('GRANT INSERT ON TABLE %s TO stagedrain_admin', dead);
END
$$;

-- What an ORM's INSERT ... RETURNING reads back, and the queue a driver's
-- size() counts by; -v app_returning_id=off leaves them out.
\if :{?app_returning_id}
\else
\set app_returning_id on
\endif
\if :app_returning_id
GRANT SELECT (id, uuid, jid, queue) ON TABLE staged_jobs TO stagedrain_app;
\endif
