<?php

namespace Stagedrain\Laravel\Console;

use InvalidArgumentException;

/**
 * The stagedrain queue connection a command is about: the one named, else
 * the default (QUEUE_CONNECTION) if it is one, else the only one.
 */
final class StagedConnection
{
    /**
     * @param  \ArrayAccess|array  $config  the app's config
     * @return array{0: string, 1: array}  its name and config
     */
    public static function find($config, ?string $name): array
    {
        $connections = $config['queue.connections'] ?? [];
        $staged = array_keys(array_filter((array) $connections, static function ($c) {
            return is_array($c) && ($c['driver'] ?? null) === 'stagedrain';
        }));
        if ($name === null || $name === '') {
            $default = $config['queue.default'] ?? null;
            if (in_array($default, $staged, true)) {
                $name = $default;
            } elseif (count($staged) === 1) {
                $name = $staged[0];
            } else {
                throw new InvalidArgumentException(sprintf(
                    'name the stagedrain queue connection (config/queue.php has %s)',
                    $staged ? 'several: '.implode(', ', $staged) : 'none with \'driver\' => \'stagedrain\''
                ));
            }
        }
        if (! in_array($name, $staged, true)) {
            throw new InvalidArgumentException(sprintf(
                'queue connection "%s" is not a stagedrain connection (config/queue.php\'s %s)',
                $name, $staged ? 'stagedrain ones: '.implode(', ', $staged) : 'has none'
            ));
        }

        return [$name, $connections[$name]];
    }
}
