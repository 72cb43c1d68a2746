-- stagedrain, optional: wake an idle relay the moment jobs commit. Not a
-- migration; run it with psql after `stagedrain migrate` if jobs are staged
-- rarely and each must start within milliseconds even after a quiet spell:
--
--   psql -X -v ON_ERROR_STOP=1 -d app -f sql/notify.sql
--
-- Without it the relay polls: at once after a batch, then waiting longer after
-- each empty read, up to --poll-interval. The cost of this trigger falls on the
-- applications: Postgres serialises every notifying commit, and `make bench`
-- measured single-row staging transactions 26% slower with it (28,146 -> 19,069
-- commits/s on 2 cores; 100-row transactions did not slow down). Remove it with
--   DROP TRIGGER staged_jobs_notify ON staged_jobs;

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
