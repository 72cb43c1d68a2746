<?php

namespace App\Jobs;

use Closure;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;

/** Cannot be serialized: serialize() throws on a Closure. */
class WithClosure implements ShouldQueue
{
    use Dispatchable, Queueable;

    public $callback;

    public function __construct(Closure $callback)
    {
        $this->callback = $callback;
    }

    public function handle(): void
    {
        ($this->callback)();
    }
}
