/* Narrowing a refused batch to the row Redis refuses (include/narrow.h). */
#include "fmacros.h"

#include <stdio.h>
#include <string.h>

#include "narrow.h"
#include "payload.h"

void narrow_init(struct narrow *n)
{
	memset(n, 0, sizeof(*n));
}

int narrow_limit(const struct narrow *n, int batch_size)
{
	return n->limit > 0 && n->limit < batch_size ? n->limit : batch_size;
}

/*
 * Halves the read while the batch had several jobs: the row Redis refuses is
 * in one half, and the other goes out meanwhile. A job refused alone is only
 * a suspect until it is refused alone again, on a fresh connection: a Redis
 * that dropped one connection by chance must not cost a good job.
 */
bool narrow_refused(struct narrow *n, size_t nrows, size_t njobs, long long first_id, const char *answer)
{
	if (njobs == 1) {
		n->limit = 1;
		n->left = 1;
		if (n->suspect != first_id) {
			n->suspect = first_id;
			return false;
		}
		payload_reason(n->reason, sizeof(n->reason), "redis refused it: %s", answer);
		return true;
	}
	n->suspect = 0;
	n->limit = nrows > 1 ? (int)((nrows + 1) / 2) : 1;
	n->left = (long)nrows;
	return false;
}

void narrow_condemn(struct narrow *n)
{
	n->condemned = n->suspect;
	n->suspect = 0;
}

void narrow_calm(struct narrow *n)
{
	n->limit = 0;
	n->left = 0;
	n->suspect = 0;
}

const char *narrow_unfit(const struct narrow *n, long long id)
{
	return n->condemned && n->condemned == id ? n->reason : NULL;
}

/* Once the refused rows have all passed (or the one refused is out), whole
 * batches again. */
void narrow_passed(struct narrow *n, size_t nrows)
{
	n->suspect = 0;
	if (n->condemned) {
		n->condemned = 0;
		n->limit = 0;
		n->left = 0;
		return;
	}
	if (n->limit && (n->left -= (long)nrows) <= 0)
		n->limit = 0;
}
