/* Runs every unit suite (no servers); exits non-zero if any case fails. */
#include "fmacros.h"

#include <check.h>
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr = srunner_create(buf_suite());
	int failed;

	srunner_add_suite(sr, config_suite());
	srunner_add_suite(sr, redis_url_suite());
	srunner_add_suite(sr, cluster_unit_suite());
	srunner_add_suite(sr, job_suite());
	srunner_add_suite(sr, backoff_suite());
	srunner_add_suite(sr, fence_suite());
	srunner_add_suite(sr, gaps_suite());
	srunner_add_suite(sr, rounds_suite());
	srunner_add_suite(sr, metrics_suite());
	srunner_add_suite(sr, laravel_format_suite());
	srunner_add_suite(sr, bullmq_format_suite());
	srunner_add_suite(sr, activejob_format_suite());
	srunner_add_suite(sr, celery_format_suite());
	srunner_add_suite(sr, queue_groups_suite());
	srunner_add_suite(sr, cmd_args_suite());
	srunner_add_suite(sr, xmin_unit_suite());
	srunner_add_suite(sr, status_unit_suite());
	srunner_add_suite(sr, target_suite());
	srunner_add_suite(sr, routes_suite());
	srunner_add_suite(sr, relay_argv_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
