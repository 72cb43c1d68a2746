<?php

namespace Stagedrain\Laravel;

use LogicException;
use Symfony\Component\Console\Exception\ExceptionInterface;

/**
 * `php artisan queue:work` (or queue:listen) was started on a stagedrain
 * connection, where it would run no job. A console exception, so artisan
 * prints its message alone, and exits 1.
 */
class NotAWorkerConnection extends LogicException implements ExceptionInterface
{
}
