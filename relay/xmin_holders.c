/* Every holder of the xmin horizon, read in one statement, and what ends each. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_conn.h"
#include "xmin_holders.h"

#define XMIN_STR_(x) #x
#define XMIN_STR(x) XMIN_STR_(x)
#define XMIN_HOLDERS_MAX_STR XMIN_STR(XMIN_HOLDERS_MAX)

/*
 * Backends: those with an xid or a snapshot (an idle READ COMMITTED
 * transaction has neither). In PostgreSQL 14 and later only sessions and
 * prepared transactions of the same database hold back its tables' cleanup;
 * a standby's feedback and a slot hold back every database's. A logical slot
 * has only catalog_xmin (the system catalogs wait, and WAL is kept); a
 * physical one an xmin when its standby sends feedback through it.
 * The LEFT JOIN gives one row even when nothing holds, for sees_all.
 */
#define HOLDERS_SQL                                                                                                      \
	"WITH p AS (SELECT pg_has_role('pg_read_all_stats', 'USAGE') AS sees_all), h AS ("                               \
	" SELECT 0 AS kind, pid, coalesce(application_name, '') AS name, coalesce(usename::text, '') AS usr,"            \
	"  coalesce(state, '') AS place, xact_start::text AS since, true AS active, false AS catalog_only,"              \
	"  coalesce(backend_xmin, backend_xid)::text AS xmin, greatest(age(backend_xid), age(backend_xmin)) AS xids,"    \
	"  extract(epoch FROM clock_timestamp() - xact_start)::float8 AS age_s"                                          \
	" FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"                          \
	"  AND xact_start IS NOT NULL AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)"                         \
	" UNION ALL"                                                                                                     \
	" SELECT 1, pid, coalesce(application_name, ''), coalesce(usename::text, ''),"                                   \
	"  coalesce(host(client_addr), 'local'), coalesce(backend_start::text, ''), true, false,"                        \
	"  backend_xmin::text, age(backend_xmin), NULL"                                                                  \
	" FROM pg_stat_replication WHERE backend_xmin IS NOT NULL"                                                       \
	" UNION ALL"                                                                                                     \
	" SELECT 2, coalesce(active_pid, 0), slot_name::text, '', slot_type, '', active, xmin IS NULL,"                  \
	"  coalesce(xmin, catalog_xmin)::text, age(coalesce(xmin, catalog_xmin)), NULL"                                  \
	" FROM pg_replication_slots WHERE coalesce(xmin, catalog_xmin) IS NOT NULL"                                      \
	" UNION ALL"                                                                                                     \
	" SELECT 3, 0, gid, owner::text, '', prepared::text, false, false, transaction::text, age(transaction),"         \
	"  extract(epoch FROM clock_timestamp() - prepared)::float8"                                                     \
	" FROM pg_prepared_xacts WHERE database = current_database())"                                                   \
	" SELECT p.sees_all, hh.kind, hh.pid, hh.name, hh.usr, hh.place, hh.since, hh.active, hh.catalog_only, hh.xmin," \
	"  hh.xids, hh.age_s"                                                                                            \
	" FROM p LEFT JOIN (SELECT * FROM h ORDER BY xids DESC LIMIT " XMIN_HOLDERS_MAX_STR ") hh ON true"               \
	" ORDER BY hh.xids DESC"

static const char *const kind_names[XMIN_NKINDS] = { "backend", "standby", "slot", "prepared" };

const char *xmin_holder_kind_name(enum xmin_holder_kind kind)
{
	return (unsigned)kind < XMIN_NKINDS ? kind_names[kind] : "unknown";
}

static void copy(char *dst, size_t len, const PGresult *res, int row, int col)
{
	snprintf(dst, len, "%s", PQgetvalue(res, row, col));
}

/* What stays the same while the same thing holds the same horizon. */
static void set_id(struct xmin_holder *h)
{
	char id[sizeof(h->id)];

	switch (h->kind) {
	case XMIN_BACKEND:
		snprintf(id, sizeof(id), "backend %d %s", h->pid, h->since);
		break;
	case XMIN_STANDBY:
		snprintf(id, sizeof(id), "standby %d %s", h->pid, h->xmin);
		break;
	case XMIN_SLOT:
		snprintf(id, sizeof(id), "slot %s %s", h->xmin, h->name);
		break;
	default:
		snprintf(id, sizeof(id), "prepared %s %s", h->since, h->name);
		break;
	}
	memcpy(h->id, id, sizeof(id));
}

static void read_row(const PGresult *res, int row, struct xmin_holder *h)
{
	memset(h, 0, sizeof(*h));
	h->kind = (enum xmin_holder_kind)atoi(PQgetvalue(res, row, 1));
	h->pid = atoi(PQgetvalue(res, row, 2));
	copy(h->name, sizeof(h->name), res, row, 3);
	copy(h->user, sizeof(h->user), res, row, 4);
	copy(h->where, sizeof(h->where), res, row, 5);
	copy(h->since, sizeof(h->since), res, row, 6);
	h->active = strcmp(PQgetvalue(res, row, 7), "t") == 0;
	h->catalog_only = strcmp(PQgetvalue(res, row, 8), "t") == 0;
	copy(h->xmin, sizeof(h->xmin), res, row, 9);
	h->xids = strtoll(PQgetvalue(res, row, 10), NULL, 10);
	h->age_s = PQgetisnull(res, row, 11) ? NAN : strtod(PQgetvalue(res, row, 11), NULL);
	set_id(h);
}

int xmin_holders_read(PGconn *pg, struct xmin_holders *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(pg, HOLDERS_SQL);
	int n;

	out->n = 0;
	out->sees_all = false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		pg_conn_error(err, errlen, pg, res, "could not read the xmin horizon's holders");
		PQclear(res);
		return -EIO;
	}
	n = PQntuples(res);
	out->sees_all = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	for (int i = 0; i < n && out->n < XMIN_HOLDERS_MAX; i++)
		if (!PQgetisnull(res, i, 1))
			read_row(res, i, &out->h[out->n++]);
	PQclear(res);
	return 0;
}

/* s as an SQL string literal's body: quotes doubled, cut to fit out. */
static void literal(const char *s, char *out, size_t len)
{
	size_t n = 0;

	for (; *s && n + 2 < len; s++) {
		if (*s == '\'')
			out[n++] = '\'';
		out[n++] = *s;
	}
	out[n] = '\0';
}

int xmin_holder_remedy(const struct xmin_holder *h, char *out, size_t len)
{
	char q[2 * sizeof(h->name) + 1];

	literal(h->name, q, sizeof(q));
	switch (h->kind) {
	case XMIN_BACKEND:
		return snprintf(out, len, "end the transaction in its application, or SELECT pg_terminate_backend(%d)",
				h->pid);
	case XMIN_STANDBY:
		return snprintf(out, len,
				"on the standby '%s' at %s: end its long query or transaction, "
				"or turn hot_standby_feedback off there",
				q, h->where);
	case XMIN_SLOT:
		if (h->active)
			return snprintf(out, len,
					"its consumer (pid %d) is behind: let it catch up, or stop it and "
					"SELECT pg_drop_replication_slot('%s')",
					h->pid, q);
		return snprintf(out, len,
				"nothing consumes it: SELECT pg_drop_replication_slot('%s') if nothing will again", q);
	case XMIN_PREPARED:
		return snprintf(out, len, "COMMIT PREPARED '%s' or ROLLBACK PREPARED '%s' (as %s or a superuser)", q, q,
				*h->user ? h->user : "its owner");
	default:
		return snprintf(out, len, "unknown holder");
	}
}
