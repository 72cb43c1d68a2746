<?php

namespace App\Console;

use App\Scenarios;
use Illuminate\Console\Command;

/**
 * php artisan e2e:scenario NAME [JSON]: runs one of App\Scenarios' methods
 * with the decoded JSON and prints what it returns as JSON on stdout.
 */
class Scenario extends Command
{
    protected $signature = 'e2e:scenario {name} {input={}}';
    protected $description = 'Run an end-to-end scenario (dispatches jobs) and print its result as JSON';

    public function handle(Scenarios $scenarios): int
    {
        $name = $this->argument('name');
        if (! method_exists($scenarios, $name)) {
            $this->error("no scenario {$name}");

            return 2;
        }
        $input = json_decode($this->argument('input'), true, 512, JSON_THROW_ON_ERROR);
        $this->line(json_encode($scenarios->{$name}($input), JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION));

        return 0;
    }
}
