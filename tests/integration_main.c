/* Runs the suites that need the real servers started by tests/services.sh. */
#include "fmacros.h"

#include <check.h>
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr = srunner_create(relay_suite());
	int failed;

	srunner_add_suite(sr, leader_suite());
	srunner_add_suite(sr, sink_suite());
	srunner_add_suite(sr, cursor_suite());
	srunner_add_suite(sr, faults_suite());
	srunner_add_suite(sr, reconcile_suite());
	srunner_add_suite(sr, trouble_suite());
	srunner_add_suite(sr, e2e_suite());
	srunner_add_suite(sr, security_suite());
	srunner_add_suite(sr, http_suite());
	srunner_add_suite(sr, guarantees_suite());
	srunner_add_suite(sr, tls_suite());
	srunner_add_suite(sr, sentinel_suite());
	srunner_add_suite(sr, sidekiq_version_suite());
	srunner_add_suite(sr, formats_suite());
	srunner_add_suite(sr, laravel_e2e_suite());
	srunner_add_suite(sr, activejob_e2e_suite());
	srunner_add_suite(sr, celery_e2e_suite());
	srunner_add_suite(sr, release_suite());
	srunner_add_suite(sr, capped_e2e_suite());
	srunner_add_suite(sr, once_suite());
	srunner_add_suite(sr, startup_suite());
	srunner_add_suite(sr, stop_suite());
	srunner_add_suite(sr, xmin_suite());
	srunner_add_suite(sr, status_suite());
	srunner_add_suite(sr, routed_suite());
	srunner_add_suite(sr, route_change_suite());
	srunner_add_suite(sr, routes_e2e_suite());
	srunner_add_suite(sr, dead_suite());
	srunner_add_suite(sr, misconfig_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
