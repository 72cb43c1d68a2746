-- stagedrain 003: a row can always be moved to staged_jobs_dead, even when
-- its id is there already: ids start again after TRUNCATE staged_jobs
-- RESTART IDENTITY, and a dead row re-staged with its old id may fail again.
-- With id as the primary key such a move failed, and the row stayed staged.
-- The dead table gets a key of its own; id stays, with an index for lookups.
ALTER TABLE staged_jobs_dead DROP CONSTRAINT IF EXISTS staged_jobs_dead_pkey;
ALTER TABLE staged_jobs_dead ADD COLUMN IF NOT EXISTS dead_id bigint GENERATED ALWAYS AS IDENTITY
    CONSTRAINT staged_jobs_dead_key PRIMARY KEY;
CREATE INDEX IF NOT EXISTS staged_jobs_dead_id ON staged_jobs_dead (id);
