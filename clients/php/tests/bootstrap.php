<?php

// Debian's Laravel (php-laravel-framework) and this package's sources, without
// a composer vendor directory: the unit suite tests the framework the
// machine has.
require_once '/usr/share/php/Illuminate/autoload.php';

spl_autoload_register(function ($class) {
    $prefix = 'Stagedrain\\Laravel\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__.'/../src/'.str_replace('\\', '/', substr($class, strlen($prefix))).'.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
