<?php

namespace Stagedrain\Laravel;

use Illuminate\Support\ServiceProvider;

/**
 * Registers the queue driver `stagedrain` (auto-discovered through
 * composer.json's extra.laravel.providers).
 */
class StagedrainServiceProvider extends ServiceProvider
{
    public function register()
    {
        // Laravel's QueueServiceProvider is deferred: the queue manager is
        // built on first use, possibly after this provider. Add the connector
        // when it is built, or now if it already was.
        $this->app->afterResolving('queue', function ($manager) {
            $this->addConnector($manager);
        });

        if ($this->app->resolved('queue')) {
            $this->addConnector($this->app->make('queue'));
        }
    }

    /**
     * @param  \Illuminate\Queue\QueueManager  $manager
     */
    protected function addConnector($manager)
    {
        $manager->addConnector('stagedrain', function () {
            return new StagedrainConnector($this->app['db']);
        });
    }
}
