<?php

namespace App\Jobs;

use App\Record;

/** The target of hand-written Class@method rows (the README's second form). */
class Recorder
{
    public function handle($job, $data): void
    {
        Record::ran('recorder', ['data' => $data] + Record::job($job));
        $job->delete();
    }
}
