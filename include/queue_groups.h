/* Grouping a batch's jobs by the list they go to, in n log n key
 * comparisons: the order every layout pushes in. Pure, no I/O. */
#ifndef STAGEDRAIN_QUEUE_GROUPS_H
#define STAGEDRAIN_QUEUE_GROUPS_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

struct queue_group_item {
	const char *queue; /* stays put until the grouping is used */
	size_t len;
	int sub;      /* a list within the queue (Celery's priority step), else 0 */
	size_t job;   /* the caller's index of the job */
	size_t added; /* how many items were added before it */
	bool first;   /* after queue_groups_sort: the first item of its list */
};

/* Its arrays are kept between batches: memory stays flat. */
struct queue_groups {
	struct queue_group_item *v, *tmp;
	size_t *at;
	size_t n, capv, captmp, capat;
	unsigned long long compares; /* key comparisons since init: the work, which a test bounds */
};

void queue_groups_init(struct queue_groups *g);
void queue_groups_free(struct queue_groups *g);
/* Empties g for a new grouping, keeping its memory. */
void queue_groups_reset(struct queue_groups *g);
/* Adds a job, in the order the lists must keep (id order). 0 or -ENOMEM. */
int queue_groups_add(struct queue_groups *g, const char *queue, size_t len, int sub, size_t job) SD_MUSTCHECK;
/* Orders the items list by list, each list's items in the order added, the
 * lists in the order of their first item; marks each list's first. 0 or -ENOMEM. */
int queue_groups_sort(struct queue_groups *g) SD_MUSTCHECK;

#endif
