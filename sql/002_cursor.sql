-- stagedrain 002: what lets the relay read with a cursor and never miss a late
-- commit. Safe to apply again.

-- The relay reads ids above its cursor and keeps the ids it skipped as gaps
-- until every transaction that could still commit them has ended. It can tell
-- only if a staging transaction holds its xid before it takes its id, so the
-- id's default takes the xid first (CASE evaluates its test first; the xid is
-- never NULL). Ids must also be handed out in order: the sequence keeps
-- CACHE 1 (the relay refuses to start otherwise). A plain expression, not a
-- function: a PL/pgSQL call per row cost staging transactions far more.
ALTER TABLE staged_jobs ALTER COLUMN id SET DEFAULT
    CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('staged_jobs_id_seq'::regclass) END;
ALTER SEQUENCE staged_jobs_id_seq CACHE 1;
