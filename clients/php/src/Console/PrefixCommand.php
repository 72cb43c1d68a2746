<?php

namespace Stagedrain\Laravel\Console;

use Illuminate\Console\Command;
use InvalidArgumentException;
use Stagedrain\Laravel\RedisPrefix;
use Stagedrain\Laravel\StagedrainConnector;

/**
 * Prints the relay's --laravel-prefix for this app: the key prefix of the
 * Redis connection its workers' queue connection uses, and nothing else, so
 *
 *   stagedrain --format laravel --laravel-prefix "$(php artisan stagedrain:prefix)"
 */
class PrefixCommand extends Command
{
    protected $signature = 'stagedrain:prefix {connection? : the stagedrain queue connection (default: QUEUE_CONNECTION\'s, or the only one)}';

    protected $description = 'Print the Redis key prefix the relay\'s --laravel-prefix must be';

    public function handle(): int
    {
        try {
            [, $config] = StagedConnection::find($this->laravel['config'], $this->argument('connection'));
            $prefix = RedisPrefix::of($this->laravel['config'], StagedrainConnector::worker($config));
        } catch (InvalidArgumentException $e) {
            $this->error($e->getMessage());

            return 2;
        }
        $this->output->writeln($prefix, \Symfony\Component\Console\Output\OutputInterface::OUTPUT_RAW);

        return 0;
    }
}
