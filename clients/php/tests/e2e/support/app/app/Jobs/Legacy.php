<?php

namespace App\Jobs;

use App\Record;

/** A string job: Queue::push('App\Jobs\Legacy@handle', $data). */
class Legacy
{
    public function handle($job, $data): void
    {
        Record::ran('legacy', ['data' => $data] + Record::job($job));
        $job->delete();
    }
}
