<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

use RedisCluster;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * On a Redis Cluster (three masters, a replica each, started here in
 * TEST_DIR by tests/services.sh cluster-start): the e2e app, copied with its
 * Redis configured as a cluster (support/cluster-app/config: phpredis'
 * RedisCluster, clusters.default, queue "{default}"), dispatches in
 * DB::transaction; the relay pushes with --redis-url redis-cluster://...;
 * an unmodified `php artisan queue:work redis --stop-when-empty` on the
 * cluster runs each job once, in order. A queue with no hash tag is
 * dead-lettered by the relay.
 */
final class ClusterTest extends E2ETestCase
{
    /** @var string|null the cluster's redis-cluster:// URL, once started */
    private $url;

    protected function tearDown(): void
    {
        try {
            parent::tearDown();
        } finally {
            if ($this->url !== null) {
                $this->services('cluster-stop');
            }
        }
    }

    public function test_jobs_dispatched_in_the_app_run_once_on_queue_work_against_the_cluster(): void
    {
        // The world's relay pushes to the single Redis: these rows are the cluster's.
        $this->e2e->stopRelay();
        $this->expectDead = true;
        $this->services('cluster-start');
        $this->url = trim((string) file_get_contents(E2E::env('TEST_DIR').'/cluster.url'));
        $app = $this->clusterApp();
        $env = ['REDIS_CLUSTER_SEEDS' => substr($this->url, strlen('redis-cluster://'))];

        $this->assertSame(E2E::PREFIX."\n", $this->artisan($app, ['stagedrain:prefix'], $env));
        $this->artisan($app, ['e2e:scenario', 'many', json_encode(['tag' => $this->tag, 'n' => 20])], $env);
        $this->artisan($app, ['e2e:scenario', 'delayed', json_encode(['tag' => $this->tag, 'seconds' => 600])], $env);
        $this->artisan($app, ['e2e:scenario', 'many', json_encode(['tag' => $this->tag.'-untagged', 'n' => 1, 'queue' => 'emails'])], $env);
        $queues = $this->e2e->owner()->query('SELECT queue, count(*) FROM staged_jobs GROUP BY queue ORDER BY queue')->fetchAll(\PDO::FETCH_KEY_PAIR);
        $this->assertSame(['emails' => 1, '{default}' => 22], $queues, 'staged on the connection\'s queue, {default}');

        $this->e2e->run([
            E2E::env('STAGEDRAIN_BIN'), '--pg-url', E2E::env('STAGEDRAIN_RELAY_PG_URL'), '--redis-url', $this->url,
            '--format', 'laravel', '--laravel-prefix', E2E::PREFIX, '--log-level', 'warn', '--once',
        ], null, $this->e2e->log('relay-cluster'));
        $this->assertSame(0, $this->stagedCount());
        $redis = $this->redis();
        $this->assertSame(21, $redis->lLen(E2E::PREFIX.'queues:{default}'));
        $this->assertSame(1, $redis->zCard(E2E::PREFIX.'queues:{default}:delayed'));

        [$status, $out, $err] = $this->e2e->exec(
            ['php', $app.'/artisan', 'queue:work', 'redis', '--queue={default}', '--stop-when-empty'],
            $env, 60.0
        );
        $this->assertSame(0, $status, "queue:work\n{$out}{$err}");

        $records = array_map(static function (string $json) {
            return json_decode($json, true, 512, JSON_THROW_ON_ERROR);
        }, $redis->lRange(E2E::PREFIX.'e2e:ran', 0, -1));
        $many = array_values(array_filter($records, function (array $r) {
            return $r['tag'] === $this->tag;
        }));
        $this->assertSame(range(0, 19), array_column($many, 'value'), 'each job once, in the order dispatched');
        $tags = array_column($records, 'tag');
        sort($tags);
        $this->assertSame(array_merge(array_fill(0, 20, $this->tag), [$this->tag.'-now']), $tags, 'nothing else ran');
        foreach ($records as $r) {
            $this->assertSame(['{default}', 'redis', 1], [$r['queue'], $r['connection'], $r['attempts']]);
        }
        $this->assertSame(0, $redis->lLen(E2E::PREFIX.'queues:{default}'));
        $this->assertSame(0, $redis->zCard(E2E::PREFIX.'queues:{default}:reserved'));
        // Not due for ten minutes: in the delayed set of the queue's slot, where
        // the worker's pop looked for due jobs.
        $delayed = $redis->zRange(E2E::PREFIX.'queues:{default}:delayed', 0, -1);
        $this->assertCount(1, $delayed);
        $this->assertSame('App\Jobs\Mark', json_decode($delayed[0], true)['displayName']);

        $dead = $this->e2e->owner()->query('SELECT queue, reason FROM staged_jobs_dead')->fetchAll();
        $this->assertCount(1, $dead);
        $this->assertSame('emails', $dead[0]['queue']);
        $this->assertStringStartsWith('queue "emails" has no hash tag for Redis Cluster', $dead[0]['reason']);
    }

    /** tests/services.sh VERB TEST_DIR: the harness's cluster verbs. */
    private function services(string $verb): void
    {
        $this->e2e->run(['bash', E2E::env('TEST_SERVICES'), $verb, E2E::env('TEST_DIR')]);
    }

    /** The e2e app copied beside it, its Redis and queue config the cluster's. */
    private function clusterApp(): string
    {
        $app = $this->e2e->dir.'/cluster-app';
        $this->e2e->run(['rm', '-rf', $app]);
        $this->e2e->run(['cp', '-a', $this->e2e->app, $app]);
        $this->e2e->run(['cp', '-R', __DIR__.'/support/cluster-app/.', $app]);

        return $app;
    }

    /** php artisan ARGS in $app, in the app's environment with $env over it; its stdout. */
    private function artisan(string $app, array $args, array $env): string
    {
        return $this->e2e->run(array_merge(['php', $app.'/artisan'], $args), $env + $this->e2e->appEnv());
    }

    private function redis(): RedisCluster
    {
        return new RedisCluster(null, explode(',', substr($this->url, strlen('redis-cluster://'))), 5.0, 5.0);
    }
}
