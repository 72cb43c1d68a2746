<?php

namespace Stagedrain\Laravel\Tests;

use Illuminate\Container\Container;
use Illuminate\Database\Capsule\Manager as DB;
use Illuminate\Database\DatabaseTransactionsManager;
use Illuminate\Events\Dispatcher;
use Illuminate\Queue\Capsule\Manager as Queue;
use PHPUnit\Framework\TestCase as PHPUnitTestCase;
use Stagedrain\Laravel\StagedrainServiceProvider;
use Stagedrain\Laravel\StagedQueue;

require_once __DIR__.'/jobs.php';

/**
 * Laravel's database and queue capsules on the harness's Postgres, without a
 * full app: the queue connection `staged` stages as the role `app` (in
 * stagedrain_app), and `admin` (the harness's superuser) reads the rows.
 */
abstract class TestCase extends PHPUnitTestCase
{
    /** @var Container */
    protected $container;

    /** @var DB */
    protected $db;

    /** @var Queue */
    protected $queue;

    /** @var Dispatcher */
    protected $events;

    protected function setUp(): void
    {
        $this->container = new Container;
        $this->events = new Dispatcher($this->container);
        $this->container->instance('events', $this->events);

        $this->db = new DB($this->container);
        $app = self::env('STAGEDRAIN_APP_PG_URL');
        $this->db->addConnection(['url' => $app]);
        $this->db->addConnection(['url' => self::env('TEST_PG_URL')], 'admin');
        // Databases tests/run made without staged_jobs, and with an
        // old staged_jobs (no uuid column).
        $this->db->addConnection(['url' => $app, 'schema' => 'php_unmigrated'], 'unmigrated');
        $this->db->addConnection(['url' => $app, 'schema' => 'php_old'], 'old');
        // What Laravel's DatabaseServiceProvider binds: with it, the
        // framework's queues defer an afterCommit job to after COMMIT.
        $transactions = new DatabaseTransactionsManager;
        $this->container->instance('db.transactions', $transactions);
        foreach (['default', 'admin', 'unmigrated', 'old'] as $name) {
            $this->db->getConnection($name)->setTransactionManager($transactions);
        }
        $this->container->instance('db', $this->db->getDatabaseManager());

        $this->queue = new Queue($this->container);
        // The workers' connection, whose Redis key prefix each row records.
        $this->queue->addConnection(['driver' => 'redis', 'connection' => 'default', 'queue' => 'default'], 'redis');
        $this->container['config']['database.redis'] = self::redisConfig();
        $this->queue->addConnection(['driver' => 'stagedrain', 'connection' => null, 'queue' => 'default'], 'staged');
        foreach (['unmigrated', 'old'] as $name) {
            $this->queue->addConnection(['driver' => 'stagedrain', 'connection' => $name, 'queue' => 'default'], $name);
        }
        // As an app would: the manager is `queue`, and the provider adds the driver.
        $this->container->instance('queue', $this->queue->getQueueManager());
        (new StagedrainServiceProvider($this->container))->register();

        $this->admin()->delete('DELETE FROM staged_jobs');
    }

    protected function tearDown(): void
    {
        // PHPUnit keeps every test object, so close what this one opened.
        foreach (array_keys($this->db->getDatabaseManager()->getConnections()) as $name) {
            $this->db->getDatabaseManager()->purge($name);
        }
    }

    /** The prefix of the workers' Redis connection in redisConfig(). */
    protected const PREFIX = 'unit_database_';

    /** config('database.redis') as a Laravel 8 app has it. */
    protected static function redisConfig(): array
    {
        return [
            'client' => 'phpredis',
            'options' => ['cluster' => 'redis', 'prefix' => self::PREFIX],
            'default' => ['url' => self::env('TEST_REDIS_URL')],
        ];
    }

    protected static function env(string $name): string
    {
        $value = getenv($name);
        if ($value === false || $value === '') {
            self::fail("$name is not set: run clients/php/tests/run under tests/services.sh");
        }

        return $value;
    }

    protected function staged(string $connection = 'staged'): StagedQueue
    {
        return $this->queue->getConnection($connection);
    }

    /** The app's connection, which staging uses. */
    protected function app(): \Illuminate\Database\Connection
    {
        return $this->db->getConnection('default');
    }

    protected function admin(): \Illuminate\Database\Connection
    {
        return $this->db->getConnection('admin');
    }

    /** Every staged row, oldest first, read as the superuser. */
    protected function rows(): array
    {
        return $this->admin()->select(
            'SELECT queue, job_class, args::text AS args, options::text AS options,'
            .' extract(epoch FROM run_at) AS run_at, uuid::text AS uuid'
            .' FROM staged_jobs ORDER BY id'
        );
    }

    /** The payload a row carries: args is a one-element array holding it as a string. */
    protected static function unwrap($row): string
    {
        $args = json_decode($row->args, true, 512, JSON_THROW_ON_ERROR);
        self::assertIsArray($args);
        self::assertCount(1, $args);
        self::assertIsString($args[0]);

        return $args[0];
    }
}
