/* Picks `stagedrain status`'s xmin horizon holder from xmin_holders' list (status_horizon.h). */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "status_horizon.h"
#include "xmin_holders.h"

/* What to act on first: what never ends by itself, then what has been held longest. */
static const struct xmin_holder *pick(const struct xmin_holders *all)
{
	const struct xmin_holder *best = NULL;

	for (size_t i = 0; i < all->n; i++)
		if (all->h[i].kind == XMIN_SLOT && !all->h[i].active)
			return &all->h[i];
	for (size_t i = 0; i < all->n; i++)
		if (!isnan(all->h[i].age_s) && (!best || all->h[i].age_s > best->age_s))
			best = &all->h[i];
	return best ? best : all->n ? &all->h[0] : NULL;
}

static void describe(const struct xmin_holder *h, char *out, size_t len)
{
	switch (h->kind) {
	case XMIN_BACKEND:
		snprintf(out, len, "pid %d, user %s, application_name \"%s\", %s", h->pid, h->user, h->name, h->where);
		break;
	case XMIN_STANDBY:
		snprintf(out, len, "standby \"%s\" at %s, walsender pid %d", h->name, h->where, h->pid);
		break;
	case XMIN_SLOT:
		snprintf(out, len, "%s slot \"%s\", %s", h->where, h->name, h->active ? "active" : "inactive");
		break;
	default:
		snprintf(out, len, "gid \"%s\", owner %s", h->name, h->user);
		break;
	}
}

int status_horizon_read(PGconn *conn, struct status_horizon *out, char *err, size_t errlen)
{
	struct xmin_holders all;
	const struct xmin_holder *h;

	memset(out, 0, sizeof(*out));
	if (xmin_holders_read(conn, &all, err, errlen) < 0)
		return -EIO;
	out->sees_all = all.sees_all;
	if (!(h = pick(&all)))
		return 0;
	out->held = true;
	snprintf(out->kind, sizeof(out->kind), "%s", xmin_holder_kind_name(h->kind));
	describe(h, out->name, sizeof(out->name));
	out->pid = h->pid;
	out->timed = !isnan(h->age_s);
	out->forever = h->kind == XMIN_SLOT && !h->active;
	out->age_s = out->timed ? h->age_s : 0;
	out->xids = h->xids;
	xmin_holder_remedy(h, out->end_it, sizeof(out->end_it));
	return 0;
}
