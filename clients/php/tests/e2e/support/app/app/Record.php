<?php

namespace App;

use Illuminate\Support\Facades\Redis;

/**
 * Every job run appends one JSON record to the Redis list e2e:ran (under the
 * connection's prefix), which the tests read to check exactly-once and order.
 */
final class Record
{
    public const KEY = 'e2e:ran';

    public static function ran(string $kind, array $fields): void
    {
        $record = ['kind' => $kind] + $fields + ['at' => microtime(true), 'pid' => getmypid()];
        Redis::connection()->rpush(self::KEY, json_encode(
            $record,
            JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION
        ));
    }

    /** What the worker knows of the job it runs. */
    public static function job($job): array
    {
        return [
            'job_id' => $job->getJobId(),
            'uuid' => $job->uuid(),
            'attempts' => $job->attempts(),
            'queue' => $job->getQueue(),
            'connection' => $job->getConnectionName(),
            'payload_job' => $job->payload()['job'],
            'display_name' => $job->payload()['displayName'],
        ];
    }
}
