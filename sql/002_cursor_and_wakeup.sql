-- stagedrain 002: what lets the relay read with a cursor and never miss a late
-- commit, and wakes it as soon as jobs commit. Safe to apply again.

-- The relay reads ids above its cursor and keeps the ids it skipped as gaps
-- until every transaction that could still commit them has ended. It can tell
-- only if a staging transaction holds its xid before it takes its id, so the
-- id's default takes the xid first. Ids must also be handed out in order: the
-- sequence keeps CACHE 1 (the relay refuses to start otherwise).
CREATE OR REPLACE FUNCTION staged_jobs_next_id() RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval('staged_jobs_id_seq');
END
$$;
ALTER TABLE staged_jobs ALTER COLUMN id SET DEFAULT staged_jobs_next_id();
ALTER SEQUENCE staged_jobs_id_seq CACHE 1;

-- One notification per staging transaction (Postgres folds duplicates) wakes
-- an idle relay at once instead of at its next poll.
CREATE OR REPLACE FUNCTION staged_jobs_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('staged_jobs', '');
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS staged_jobs_notify ON staged_jobs;
CREATE TRIGGER staged_jobs_notify AFTER INSERT ON staged_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION staged_jobs_notify();
