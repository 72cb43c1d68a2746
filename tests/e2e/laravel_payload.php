<?php
// The payload Laravel's Redis queue writes for a string job "Class@method",
// built the way Illuminate\Queue\Queue::createStringPayload and
// RedisQueue::createPayloadArray build it (Laravel 10.x, 11.x, 12.0-12.10;
// laravel/framework's source, not installed here) and encoded as
// Queue::createPayload does. The relay's payloads are compared with it byte
// for byte (tests/check_e2e_laravel.c).
//
//   php laravel_payload.php UUID ID JOB DATA_JSON [OPTIONS_JSON]
//       the payload; OPTIONS_JSON sets the job properties a row's options
//       carry (maxTries, maxExceptions, failOnTimeout, backoff, timeout)
//   php laravel_payload.php --fire PAYLOAD ARGS_JSON
//       what Job::fire() makes of PAYLOAD: "class method same" when the
//       handler's $data is json_decode(ARGS_JSON, true), "... differs" if not

function fail(string $msg): void
{
    fwrite(STDERR, "laravel_payload.php: $msg\n");
    exit(2);
}

function decode(string $json)
{
    $v = json_decode($json, true);
    if (json_last_error() !== JSON_ERROR_NONE) {
        fail('not json: ' . json_last_error_msg() . ": $json");
    }
    return $v;
}

function payload(string $uuid, string $id, string $job, $data, array $options): string
{
    // Queue::createStringPayload, with Str::uuid() given.
    $payload = [
        'uuid' => $uuid,
        'displayName' => explode('@', $job)[0],
        'job' => $job,
        'maxTries' => null,
        'maxExceptions' => null,
        'failOnTimeout' => false,
        'backoff' => null,
        'timeout' => null,
        'data' => $data,
    ];
    // The job properties an object payload takes from the job; backoff as
    // Queue::getJobBackoff writes it (Collection::wrap(...)->implode(',')).
    foreach ($options as $key => $value) {
        if (!array_key_exists($key, $payload) || in_array($key, ['uuid', 'displayName', 'job', 'data'], true)) {
            fail("not a job property: $key");
        }
        $payload[$key] = $key === 'backoff' && $value !== null ? implode(',', (array) $value) : $value;
    }
    // RedisQueue::createPayloadArray, with getRandomId() given.
    $payload = array_merge($payload, ['id' => $id, 'attempts' => 0]);
    $json = json_encode($payload, JSON_UNESCAPED_UNICODE);
    if ($json === false) {
        fail('json_encode: ' . json_last_error_msg());
    }
    return $json;
}

// Job::fire(): JobName::parse is Str::parseCallback($job, 'fire').
function fire(string $payload, string $args): string
{
    $p = decode($payload);
    [$class, $method] = str_contains($p['job'], '@') ? explode('@', $p['job'], 2) : [$p['job'], 'fire'];
    return "$class $method " . ($p['data'] === decode($args) ? 'same' : 'differs');
}

$argv = $_SERVER['argv'];
if (count($argv) === 4 && $argv[1] === '--fire') {
    echo fire($argv[2], $argv[3]), "\n";
} elseif (count($argv) === 5 || count($argv) === 6) {
    echo payload($argv[1], $argv[2], $argv[3], decode($argv[4]), count($argv) === 6 ? decode($argv[5]) : []), "\n";
} else {
    fail('usage: UUID ID JOB DATA_JSON [OPTIONS_JSON] | --fire PAYLOAD ARGS_JSON');
}
