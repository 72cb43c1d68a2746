-- stagedrain 001: the table applications stage jobs in, inside their own
-- transactions, and the table rows go to when they cannot become a job.
-- Safe to apply again: every statement checks before it creates.

CREATE TABLE IF NOT EXISTS staged_jobs (
    id          bigserial PRIMARY KEY,
    queue       text        NOT NULL DEFAULT 'default',
    job_class   text        NOT NULL,
    args        jsonb       NOT NULL DEFAULT '[]',
    run_at      timestamptz,                        -- NULL or past: now; future: scheduled
    options     jsonb       NOT NULL DEFAULT '{}',  -- extra job-hash keys: retry, tags, ...
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- Sidekiq's jid, fixed when the row is staged so a job pushed twice
    -- carries the same jid and consumers can tell.
    jid         text        NOT NULL
                DEFAULT substr(replace(gen_random_uuid()::text, '-', ''), 1, 24)
                CONSTRAINT staged_jobs_jid_format CHECK (jid ~ '^[0-9a-f]{24}$')
);

CREATE TABLE IF NOT EXISTS staged_jobs_dead (
    id          bigint PRIMARY KEY,                 -- the staged row's id
    queue       text,
    job_class   text,
    args        jsonb,
    run_at      timestamptz,
    options     jsonb,
    created_at  timestamptz,
    jid         text,
    reason      text        NOT NULL,               -- why the relay could not push it
    failed_at   timestamptz NOT NULL DEFAULT now()
);
