-- stagedrain 005: tenants, and the table a capped queue's jobs wait in.
--
-- staged_jobs.tenant names whose work a job is (an account, a customer); NULL
-- is one shared tenant, so inserts that do not name it keep working. When a
-- queue is at its cap (--max-queue-length, --queue-limit), the relay moves its
-- jobs, in the batch that read them, to staged_jobs_held, and releases them
-- from there round-robin across tenants: each held row gets a round (a
-- tenant's next job goes to the round after its last), and the relay reads
-- them in (round, hold_id) order from a cursor, so a release never walks the
-- index entries of rows already released. Only the relay writes this table.
-- Safe to apply again: every statement checks before it creates. Adding a
-- nullable column without a default does not rewrite staged_jobs.
ALTER TABLE staged_jobs ADD COLUMN IF NOT EXISTS tenant text;
ALTER TABLE staged_jobs_dead ADD COLUMN IF NOT EXISTS tenant text;

CREATE TABLE IF NOT EXISTS staged_jobs_held (
    hold_id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- the order rows were held in
    id          bigint      NOT NULL,                                  -- the staged row's id
    queue       text        NOT NULL,
    job_class   text        NOT NULL,
    args        jsonb       NOT NULL,
    run_at      timestamptz,
    options     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    jid         text        NOT NULL,
    uuid        uuid        NOT NULL,
    tenant      text,
    round       bigint      NOT NULL,                                  -- released in (round, hold_id) order
    held_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS staged_jobs_held_release ON staged_jobs_held (queue, round, hold_id);
-- The fence's delete finds a released row by id and jid.
CREATE INDEX IF NOT EXISTS staged_jobs_held_id ON staged_jobs_held (id);
