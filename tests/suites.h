/* Every Check suite, one per module or concern. */
#ifndef STAGEDRAIN_SUITES_H
#define STAGEDRAIN_SUITES_H

#include <check.h>

Suite *buf_suite(void);
Suite *config_suite(void);
Suite *redis_url_suite(void);
Suite *cluster_unit_suite(void);
Suite *job_suite(void);
Suite *backoff_suite(void);
Suite *fence_suite(void);
Suite *gaps_suite(void);
Suite *rounds_suite(void);
Suite *metrics_suite(void);
Suite *laravel_format_suite(void);
Suite *bullmq_format_suite(void);
Suite *activejob_format_suite(void);
Suite *celery_format_suite(void);
Suite *queue_groups_suite(void);
Suite *cmd_args_suite(void);
Suite *status_unit_suite(void);
Suite *target_suite(void);
Suite *routes_suite(void);
Suite *relay_argv_suite(void);

Suite *relay_suite(void);
Suite *faults_suite(void);
Suite *leader_suite(void);
Suite *e2e_suite(void);
Suite *sink_suite(void);
Suite *cursor_suite(void);
Suite *security_suite(void);
Suite *trouble_suite(void);
Suite *http_suite(void);
Suite *reconcile_suite(void);
Suite *guarantees_suite(void);
Suite *tls_suite(void);
Suite *sentinel_suite(void);
Suite *sentinel_wait_suite(void);
Suite *cluster_suite(void);
Suite *cluster_moves_suite(void);
Suite *cluster_failover_suite(void);
Suite *sentinel_start_suite(void);
Suite *sentinel_tls_suite(void);
Suite *sidekiq_version_suite(void);
Suite *formats_suite(void);
Suite *laravel_e2e_suite(void);
Suite *bullmq_e2e_suite(void);
Suite *activejob_e2e_suite(void);
Suite *celery_e2e_suite(void);
Suite *release_suite(void);
Suite *capped_e2e_suite(void);
Suite *once_suite(void);
Suite *startup_suite(void);
Suite *stop_suite(void);
Suite *xmin_suite(void);
Suite *xmin_unit_suite(void);
Suite *status_suite(void);
Suite *routed_suite(void);
Suite *route_change_suite(void);
Suite *routes_e2e_suite(void);
Suite *dead_suite(void);
Suite *misconfig_suite(void);

#endif
