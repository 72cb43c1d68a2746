<?php

namespace Stagedrain\Laravel;

use Illuminate\Console\Events\ArtisanStarting;
use Illuminate\Console\Events\CommandFinished;
use Illuminate\Console\Events\CommandStarting;
use Illuminate\Support\ServiceProvider;

/**
 * Registers the queue driver `stagedrain` (auto-discovered through
 * composer.json's extra.laravel.providers); in the console, the migrations to
 * publish (--tag=stagedrain-migrations), the commands stagedrain:prefix and
 * stagedrain:status, and the refusal of `queue:work` on a stagedrain connection.
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

    public function boot()
    {
        if (! $this->app->runningInConsole()) {
            return;
        }
        $migrations = [];
        foreach (glob(dirname(__DIR__).'/database/migrations/*.php') ?: [] as $file) {
            $migrations[$file] = $this->migrationPath(basename($file, '.php'));
        }
        $this->publishes($migrations, 'stagedrain-migrations');
        $this->commands([Console\PrefixCommand::class, Console\StatusCommand::class]);

        $guard = new WorkerGuard($this->app['config']);
        $events = $this->app['events'];
        $events->listen(ArtisanStarting::class, function (ArtisanStarting $event) use ($guard) {
            $guard->artisanStarting($event->artisan);
        });
        $events->listen(CommandStarting::class, [$guard, 'commandStarting']);
        $events->listen(CommandFinished::class, [$guard, 'commandFinished']);
    }

    /**
     * @param  \Illuminate\Queue\QueueManager  $manager
     */
    protected function addConnector($manager)
    {
        $manager->addConnector('stagedrain', function () {
            return new StagedrainConnector($this->app['db'], $this->app['config']);
        });
    }

    /**
     * Where migration $name is published: dated now, so it runs after the
     * app's existing ones (the package's own, dated alike, run in name order,
     * create_ before update_); or the name it was published under before, so
     * publishing again finds it there (and keeps it, without --force). After
     * a package update, publishing again adds only the newer ones.
     */
    protected function migrationPath(string $name): string
    {
        $published = glob($this->app->databasePath("migrations/*_{$name}.php")) ?: [];

        return $published[0] ?? $this->app->databasePath('migrations/'.date('Y_m_d_His')."_{$name}.php");
    }
}
