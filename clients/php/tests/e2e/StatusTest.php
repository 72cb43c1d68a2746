<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * php artisan stagedrain:status: the relay's `stagedrain status --json` in the
 * app's environment, summed up, with its exit status; and
 * php artisan stagedrain:prefix, the relay's --laravel-prefix.
 */
final class StatusTest extends E2ETestCase
{
    /** The relay's settings, as its environment would give them (as the relay role). */
    private function relayEnv(array $more = []): array
    {
        return $more + [
            'STAGEDRAIN_PG_URL' => E2E::env('STAGEDRAIN_RELAY_PG_URL'),
            'STAGEDRAIN_REDIS_URL' => E2E::env('TEST_REDIS_URL'),
        ];
    }

    private function status(array $args = [], array $env = []): array
    {
        return $this->e2e->exec(array_merge(['php', 'artisan', 'stagedrain:status'], $args), $this->relayEnv($env));
    }

    public function test_healthy_with_the_relay_running(): void
    {
        $this->e2e->appDb()->exec("INSERT INTO staged_jobs (queue, job_class, args) VALUES ('nobody-works-this', 'App\\Jobs\\Recorder@handle', '[]')");
        $this->waitDrained();
        $this->e2e->owner()->exec("INSERT INTO staged_jobs_dead (id, queue, job_class, reason) VALUES (-1, 'x', 'X', 'a test row')");
        $this->expectDead = true;

        [$status, $out, $err] = $this->status();
        $this->assertSame(0, $status, $out.$err);
        $this->assertSame(
            "backlog   0 staged\ndead      1 rows\nprefix    \"".E2E::PREFIX."\" (--laravel-prefix)\nhealthy\n",
            $out
        );
        $this->assertSame('', $err);
    }

    public function test_needs_attention_when_no_relay_holds_the_leader_lock(): void
    {
        $this->e2e->stopRelay();
        $this->e2e->appDb()->exec("INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', 'App\\Jobs\\Recorder@handle', '[]')");

        [$status, $out, $err] = $this->status(['--', '--max-age', '1h']);
        $this->assertSame(1, $status, $out.$err);
        $this->assertSame(
            "backlog   1 staged\ndead      0 rows\nprefix    \"".E2E::PREFIX."\" (--laravel-prefix)\nneeds attention:\n  no relay holds the leader lock\n",
            $out
        );

        [$status, $out] = $this->status(['--json']);
        $this->assertSame(1, $status);
        $json = json_decode($out, true);
        $this->assertFalse($json['healthy']);
        $this->assertSame(['no relay holds the leader lock'], $json['problems']);
        $this->assertSame(1, $json['backlog']['staged']);
        $this->e2e->owner()->exec('DELETE FROM staged_jobs');
    }

    /** STAGEDRAIN_FORMAT and the prefix reach the relay's status: it reads this app's queue lists. */
    public function test_the_relay_reads_the_apps_queues(): void
    {
        [$status, $out] = $this->status(['--json', '--', '--queue-limit', 'capped=5']);
        $this->assertSame(0, $status, $out);
        $this->e2e->redis()->rPush(E2E::PREFIX.'queues:capped', 'a', 'b', 'c');
        [, $out] = $this->status(['--json', '--', '--queue-limit', 'capped=5']);
        $queues = json_decode($out, true)['queues'];
        $this->assertSame([['capped', 5, 3]], array_map(static function ($q) {
            return [$q['name'], $q['cap'], $q['length']];
        }, $queues));
        $this->e2e->redis()->del(E2E::PREFIX.'queues:capped');
    }

    public function test_usage_errors_and_a_missing_binary(): void
    {
        [$status, $out, $err] = $this->status(['--', '--max-age', '5']);
        $this->assertSame(2, $status, $out);
        $this->assertSame('', $out);
        $this->assertStringContainsString('--max-age', $err);

        [$status, $out, $err] = $this->status([], ['STAGEDRAIN_BIN' => '/nonexistent/stagedrain']);
        $this->assertSame(2, $status);
        $this->assertStringContainsString('STAGEDRAIN_BIN is /nonexistent/stagedrain, which is not an executable file', $out.$err);

        [$status, $out, $err] = $this->status([], ['STAGEDRAIN_BIN' => null, 'PATH' => '/usr/bin:/bin']);
        $this->assertSame(2, $status);
        $this->assertStringContainsString('no stagedrain binary: none on PATH, and STAGEDRAIN_BIN is not set', $out.$err);
    }

    public function test_a_different_prefix_in_the_environment_is_named(): void
    {
        [$status, $out, $err] = $this->status([], ['STAGEDRAIN_LARAVEL_PREFIX' => 'laravel_database_']);
        $this->assertSame(0, $status, $out.$err);
        $this->assertStringContainsString('STAGEDRAIN_LARAVEL_PREFIX is "laravel_database_", but this app\'s workers read keys under "'.E2E::PREFIX.'"', $out.$err);
        $this->assertStringContainsString("prefix    \"laravel_database_\" (--laravel-prefix)\n", $out);
    }

    public function test_prefix_prints_the_relays_laravel_prefix_alone(): void
    {
        $prefix = function (array $args = [], array $env = []) {
            return $this->e2e->exec(array_merge(['php', 'artisan', 'stagedrain:prefix'], $args), $env);
        };
        $this->assertSame([0, E2E::PREFIX."\n", ''], $prefix());
        $this->assertSame([0, E2E::PREFIX."\n", ''], $prefix(['staged']));
        // Laravel derives it from APP_NAME, unless REDIS_PREFIX says.
        $this->assertSame([0, "my_shop_database_\n", ''], $prefix([], ['APP_NAME' => 'My Shop']));
        $this->assertSame([0, "jobs:\n", ''], $prefix([], ['REDIS_PREFIX' => 'jobs:']));

        [$status, $out, $err] = $prefix(['redis']);
        $this->assertSame(2, $status);
        $this->assertStringContainsString('queue connection "redis" is not a stagedrain connection', $out.$err);
    }
}
