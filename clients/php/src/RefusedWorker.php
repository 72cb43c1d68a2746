<?php

namespace Stagedrain\Laravel;

use Symfony\Component\Console\Command\Command;
use Symfony\Component\Console\Input\InputInterface;
use Symfony\Component\Console\Output\ConsoleOutputInterface;
use Symfony\Component\Console\Output\OutputInterface;

/**
 * Stands in for `queue:work` or `queue:listen` started on a stagedrain
 * connection (see WorkerGuard): prints why and what to run instead, on one
 * line of stderr, and exits 1.
 *
 * @internal
 */
final class RefusedWorker extends Command
{
    /** @var string */
    private $why;

    public function __construct(string $name, string $why)
    {
        parent::__construct($name);
        $this->why = $why;
        $this->setHidden(true);
        // Whatever arguments the worker was given: they were read already.
        $this->ignoreValidationErrors();
    }

    protected function execute(InputInterface $input, OutputInterface $output): int
    {
        $err = $output instanceof ConsoleOutputInterface ? $output->getErrorOutput() : $output;
        $err->writeln($this->why, OutputInterface::OUTPUT_RAW);

        return 1;
    }
}
