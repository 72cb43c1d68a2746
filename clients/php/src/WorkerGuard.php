<?php

namespace Stagedrain\Laravel;

use Illuminate\Console\Events\CommandFinished;
use Illuminate\Console\Events\CommandStarting;
use Symfony\Component\Console\Application;
use Symfony\Component\Console\Command\Command;
use Symfony\Component\Console\Exception\ExceptionInterface;

/**
 * Stops `php artisan queue:work` and `queue:listen` on a stagedrain
 * connection before they start. Such a worker pops nothing (the connection
 * only stages; the relay pushes to Redis), so it would sit there, logging
 * StagedQueue::pop()'s error every few seconds, while no job runs. A bare
 * `queue:work` (a Supervisor or Forge set-up) works the default connection,
 * which QUEUE_CONNECTION=staged makes the stagedrain one.
 *
 * For that one run, the console gets a RefusedWorker in the command's place,
 * which prints one line and exits 1 (an exception would be printed wrapped in
 * a box, and logged with its trace); the command is put back when it ends.
 *
 * @internal  the service provider hands it ArtisanStarting, CommandStarting and CommandFinished
 */
final class WorkerGuard
{
    private const WORKERS = ['queue:work', 'queue:listen'];

    /** @var \ArrayAccess|array the app's config */
    private $config;

    /** @var \Symfony\Component\Console\Application|null */
    private $artisan;

    /** @var \Symfony\Component\Console\Command\Command|null the command a RefusedWorker stands in for */
    private $replaced;

    /** @param  \ArrayAccess|array  $config */
    public function __construct($config)
    {
        $this->config = $config;
    }

    public function artisanStarting(Application $artisan): void
    {
        $this->artisan = $artisan;
    }

    public function commandStarting(CommandStarting $event): void
    {
        $command = $this->artisan && $event->command !== null ? $this->find($event->command) : null;
        if ($command === null) {
            return;
        }
        try {
            // The input is not bound to the command yet: bind a copy to read
            // the connection argument as the command will.
            $command->mergeApplicationDefinition();
            $input = clone $event->input;
            $input->bind($command->getDefinition());
            $named = $input->getArgument('connection');
        } catch (ExceptionInterface $e) {
            return; // bad arguments: the console says so itself
        }
        // WorkCommand's and ListenCommand's own default.
        $connection = $named ?: $this->config['queue.default'];
        $config = $this->config['queue.connections.'.$connection] ?? null;
        if (! is_array($config) || ($config['driver'] ?? null) !== 'stagedrain') {
            return;
        }
        $this->replaced = $command;
        $this->artisan->add(new RefusedWorker($command->getName(), sprintf(
            '%s: "%s"%s is a stagedrain connection, which only stages jobs: run the worker on the Redis '
            .'connection the relay pushes to: php artisan %s %s',
            $command->getName(), $connection, $named ? '' : ' (the default, QUEUE_CONNECTION)',
            $command->getName(), StagedrainConnector::worker($config)
        )));
    }

    public function commandFinished(CommandFinished $event): void
    {
        if ($this->replaced !== null) {
            $this->artisan->add($this->replaced);
            $this->replaced = null;
        }
    }

    /** The worker command $name names (abbreviations too, as the console finds them), or null. */
    private function find(string $name): ?Command
    {
        try {
            $command = $this->artisan->find($name);
        } catch (ExceptionInterface $e) {
            return null; // not a command: the console says so itself
        }

        return in_array($command->getName(), self::WORKERS, true) ? $command : null;
    }
}
