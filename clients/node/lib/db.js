'use strict';
/*
 * Rows into staged_jobs through the caller's own handle, so they commit or
 * roll back with its transaction: a node-postgres Client or PoolClient (or
 * anything with query(text, values)), or a knex transaction (raw with ?).
 * Values are bound, never written into the SQL.
 */

const COLUMNS = '(queue, job_class, args, options, uuid, created_at)';

// Postgres takes at most 65,535 bound values a statement: 6 a row.
const ROWS_PER_INSERT = 10000;

function isKnex(db) {
  return typeof db === 'function' && typeof db.raw === 'function' && typeof db.query !== 'function';
}

// How to run a statement on db, or why db cannot be used.
function handle(db) {
  if (db && typeof db.query === 'function') {
    return { param: (n) => `$${n}`, run: (sql, values) => db.query(sql, values) };
  }
  if (db && isKnex(db)) {
    return { param: () => '?', run: (sql, values) => db.raw(sql, values) };
  }
  return null;
}

/*
 * One INSERT of these rows ({ queue, name, args, options, uuid, createdAt };
 * uuid null for a job with an id of its own: the column's default), or one
 * per ROWS_PER_INSERT of them, in order.
 */
async function insertRows(h, rows) {
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
    const values = [];
    const tuples = [];
    for (const row of rows.slice(start, start + ROWS_PER_INSERT)) {
      const p = (v) => {
        values.push(v);
        return h.param(values.length);
      };
      // In column order: ? placeholders are bound by position.
      const queue = p(row.queue);
      const name = p(row.name);
      const args = p(row.args);
      const options = p(row.options);
      const uuid = row.uuid === null ? 'DEFAULT' : `${p(row.uuid)}::uuid`;
      const createdAt = p(row.createdAt);
      tuples.push(`(${queue}, ${name}, ${args}::json, ${options}::json, ${uuid}, ${createdAt}::timestamptz)`);
    }
    await h.run(`INSERT INTO staged_jobs ${COLUMNS} VALUES ${tuples.join(', ')}`, values);
  }
}

module.exports = { handle, insertRows, ROWS_PER_INSERT };
