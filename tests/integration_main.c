/*
 * Runs the suites that need the real servers started by tests/services.sh:
 * every one, or those named on the command line (tests/integration.sh gives
 * each of its parallel runs a share). --list prints the names.
 */
#include "fmacros.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

static const struct {
	const char *name;
	Suite *(*make)(void);
} suites[] = {
	{ "relay", relay_suite },
	{ "leader", leader_suite },
	{ "sink", sink_suite },
	{ "cursor", cursor_suite },
	{ "faults", faults_suite },
	{ "reconcile", reconcile_suite },
	{ "trouble", trouble_suite },
	{ "e2e", e2e_suite },
	{ "security", security_suite },
	{ "http", http_suite },
	{ "guarantees", guarantees_suite },
	{ "tls", tls_suite },
	{ "sentinel", sentinel_suite },
	{ "sentinel_wait", sentinel_wait_suite },
	{ "cluster", cluster_suite },
	{ "cluster_moves", cluster_moves_suite },
	{ "cluster_failover", cluster_failover_suite },
	{ "sentinel_start", sentinel_start_suite },
	{ "sentinel_tls", sentinel_tls_suite },
	{ "sidekiq_version", sidekiq_version_suite },
	{ "formats", formats_suite },
	{ "laravel_e2e", laravel_e2e_suite },
	{ "bullmq_e2e", bullmq_e2e_suite },
	{ "activejob_e2e", activejob_e2e_suite },
	{ "celery_e2e", celery_e2e_suite },
	{ "release", release_suite },
	{ "capped_e2e", capped_e2e_suite },
	{ "once", once_suite },
	{ "startup", startup_suite },
	{ "stop", stop_suite },
	{ "xmin", xmin_suite },
	{ "status", status_suite },
	{ "routed", routed_suite },
	{ "route_change", route_change_suite },
	{ "routes_e2e", routes_e2e_suite },
	{ "dead", dead_suite },
	{ "misconfig", misconfig_suite },
};
#define NSUITES (sizeof(suites) / sizeof(suites[0]))

static int find(const char *name)
{
	for (size_t i = 0; i < NSUITES; i++)
		if (strcmp(suites[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Adds the suite to the runner, creating it with the first. */
static void add(SRunner **sr, size_t i)
{
	if (*sr)
		srunner_add_suite(*sr, suites[i].make());
	else
		*sr = srunner_create(suites[i].make());
}

#define MAX_MSG (256 * 1024)

int main(int argc, char **argv)
{
	SRunner *sr = NULL;
	int failed;

	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < NSUITES; i++)
			printf("%s\n", suites[i].name);
		return EXIT_SUCCESS;
	}
	for (int a = 1; a < argc; a++) {
		int i = find(argv[a]);
		if (i < 0) {
			fprintf(stderr, "%s: no suite named %s (--list names them)\n", argv[0], argv[a]);
			return 2;
		}
		add(&sr, (size_t)i);
	}
	for (size_t i = 0; argc == 1 && i < NSUITES; i++)
		add(&sr, i);
	/* A failure's message may hold a whole /metrics page or a relay's log;
	 * past Check's 4 KB default it is lost, and with it the failure's cause. */
	check_set_max_msg_size(MAX_MSG);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
