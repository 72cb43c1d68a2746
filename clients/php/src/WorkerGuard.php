<?php

namespace Stagedrain\Laravel;

use Illuminate\Console\Events\CommandStarting;
use Symfony\Component\Console\Application;
use Symfony\Component\Console\Exception\ExceptionInterface;

/**
 * Stops `php artisan queue:work` and `queue:listen` on a stagedrain
 * connection before they start. Such a worker pops nothing (the connection
 * only stages; the relay pushes to Redis), so it would sit there, logging
 * StagedQueue::pop()'s error every few seconds, while no job runs. A bare
 * `queue:work` (a Supervisor or Forge set-up) works the default connection,
 * which QUEUE_CONNECTION=staged makes the stagedrain one.
 *
 * @internal  the service provider listens with it to ArtisanStarting and CommandStarting
 */
final class WorkerGuard
{
    private const WORKERS = ['queue:work', 'queue:listen'];

    /** @var \ArrayAccess|array the app's config */
    private $config;

    /** @var \Symfony\Component\Console\Application|null */
    private $artisan;

    /** @param  \ArrayAccess|array  $config */
    public function __construct($config)
    {
        $this->config = $config;
    }

    public function artisanStarting(Application $artisan): void
    {
        $this->artisan = $artisan;
    }

    /** @throws \Stagedrain\Laravel\NotAWorkerConnection */
    public function commandStarting(CommandStarting $event): void
    {
        if ($this->artisan === null || $event->command === null) {
            return;
        }
        try {
            // find(), as the console will: abbreviations and aliases too.
            $command = $this->artisan->find($event->command);
            if (! in_array($command->getName(), self::WORKERS, true)) {
                return;
            }
            // The input is not bound to the command yet: bind a copy to read
            // the connection argument as the command will.
            $command->mergeApplicationDefinition();
            $input = clone $event->input;
            $input->bind($command->getDefinition());
            $named = $input->getArgument('connection');
        } catch (ExceptionInterface $e) {
            return; // not a command, or bad arguments: the console says so itself
        }
        // WorkCommand's and ListenCommand's own default.
        $connection = $named ?: $this->config['queue.default'];
        $config = $this->config['queue.connections.'.$connection] ?? null;
        if (! is_array($config) || ($config['driver'] ?? null) !== 'stagedrain') {
            return;
        }
        throw new NotAWorkerConnection(sprintf(
            '%s: "%s"%s is a stagedrain connection, which only stages jobs: run the worker on the Redis '
            .'connection the relay pushes to: php artisan %s %s',
            $command->getName(), $connection, $named ? '' : ' (the default, QUEUE_CONNECTION)',
            $command->getName(), StagedrainConnector::worker($config)
        ));
    }
}
