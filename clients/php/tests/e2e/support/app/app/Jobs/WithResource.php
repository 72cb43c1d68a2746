<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;

/** Cannot be staged: serialize() silently writes a resource as int 0. */
class WithResource implements ShouldQueue
{
    use Dispatchable, Queueable;

    public $tag;
    protected $stream;

    public function __construct(string $tag)
    {
        $this->tag = $tag;
        $this->stream = fopen('php://memory', 'r+');
    }

    public function handle(): void
    {
        fwrite($this->stream, $this->tag);
    }
}
