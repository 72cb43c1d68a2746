<?php

namespace Stagedrain\Laravel\Tests;

use Illuminate\Container\Container;
use Illuminate\Queue\Capsule\Manager as Queue;
use Stagedrain\Laravel\StagedrainServiceProvider;
use Stagedrain\Laravel\StagedQueue;

require_once __DIR__.'/TestCase.php';

class ServiceProviderTest extends TestCase
{
    /** Laravel builds the queue manager on first use, after providers register. */
    public function testAddsTheDriverWhenTheManagerIsBuiltLater(): void
    {
        $container = new Container;
        $container->instance('db', $this->db->getDatabaseManager());
        (new StagedrainServiceProvider($container))->register();
        $capsule = new Queue($container);
        $capsule->addConnection(['driver' => 'stagedrain', 'connection' => null, 'queue' => 'jobs'], 'staged');
        $capsule->addConnection(['driver' => 'redis', 'connection' => 'default'], 'redis');
        $container['config']['database.redis'] = self::redisConfig();
        $container->singleton('queue', function () use ($capsule) {
            return $capsule->getQueueManager();
        });

        $queue = $container->make('queue')->connection('staged');
        $this->assertInstanceOf(StagedQueue::class, $queue);
        $this->assertSame('jobs', $queue->getQueue(null));
        $this->assertSame('default', $queue->getDatabase()->getName());
    }

    /** TestCase::setUp registers the provider after `queue` exists. */
    public function testAddsTheDriverToAManagerAlreadyBuilt(): void
    {
        $this->assertInstanceOf(StagedQueue::class, $this->container->make('queue')->connection('staged'));
        $this->assertSame('staged', $this->staged()->getConnectionName());
    }
}
