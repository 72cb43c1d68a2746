<?php

namespace App\Jobs;

use App\Record;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use RuntimeException;
use Throwable;

/** Always fails: three tries, 1 s then 2 s apart, then failed_jobs. */
class Flaky implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 3;
    public $backoff = [1, 2];
    public $tag;

    public function __construct(string $tag)
    {
        $this->tag = $tag;
    }

    public function handle(): void
    {
        Record::ran('flaky', ['tag' => $this->tag] + Record::job($this->job));
        throw new RuntimeException("flaky {$this->tag} fails on attempt {$this->attempts()}");
    }

    public function failed(Throwable $e): void
    {
        Record::ran('flaky-failed', ['tag' => $this->tag, 'message' => $e->getMessage()]);
    }
}
