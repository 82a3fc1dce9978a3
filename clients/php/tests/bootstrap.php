<?php

declare(strict_types=1);

// PSR-4 for the tests, as Composer's autoloader does for users (no `composer install` needed to run them).
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Pont\\')) {
        $file = __DIR__ . '/../src/' . str_replace('\\', '/', substr($class, 5)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
