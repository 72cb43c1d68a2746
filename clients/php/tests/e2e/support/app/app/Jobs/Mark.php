<?php

namespace App\Jobs;

use App\Record;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/** A job that records its tag and value: order, delays, queues, chains. */
class Mark implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tag;
    public $value;

    public function __construct(string $tag, $value = null)
    {
        $this->tag = $tag;
        $this->value = $value;
    }

    public function handle(): void
    {
        Record::ran('mark', ['tag' => $this->tag, 'value' => $this->value, 'own_queue' => $this->queue] + Record::job($this->job));
    }
}
