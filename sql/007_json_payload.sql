-- stagedrain 007: args and options keep the JSON text the app wrote.
--
-- jsonb reorders object keys ({"key":…,"on":…} comes back {"on":…,"key":…}),
-- turns -0.0 into 0, refuses \u0000 and is printed anew on every read; json
-- keeps the text as written, so a worker receives what its framework encoded.
-- The relay's own check (duplicate keys, nesting, numbers a worker cannot
-- read) stays the gate. jsonb values still insert: jsonb -> json is an
-- assignment cast. staged_jobs_dead and staged_jobs_held follow, so a row
-- moves between the tables unchanged.
--
-- Cost of the upgrade: each table still holding jsonb is rewritten under an
-- ACCESS EXCLUSIVE lock (an app's INSERT waits for it), in this migration's
-- one transaction. staged_jobs is drained, so that is its few staged rows;
-- a large staged_jobs_dead or staged_jobs_held takes longer (1.6 million
-- small rows took 2.5 s on a 2-core machine): purge what you no longer need
-- first (`stagedrain dead purge`). A column that is json already is left
-- alone.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT a.attrelid::regclass AS tab, a.attname AS col
          FROM pg_attribute a
         WHERE a.attrelid IN ('staged_jobs'::regclass, 'staged_jobs_dead'::regclass, 'staged_jobs_held'::regclass)
           AND a.attname IN ('args', 'options') AND NOT a.attisdropped
           AND a.atttypid = 'jsonb'::regtype
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I TYPE json USING %I::json', c.tab, c.col, c.col);
    END LOOP;
    -- The defaults were jsonb literals, which the assignment cast kept working.
    ALTER TABLE staged_jobs ALTER COLUMN args SET DEFAULT '[]'::json;
    ALTER TABLE staged_jobs ALTER COLUMN options SET DEFAULT '{}'::json;
END
$$;
