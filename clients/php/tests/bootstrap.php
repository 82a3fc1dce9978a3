<?php

declare(strict_types=1);

// PSR-4 as Composer's autoloader does it for users, from composer.json's own autoload and autoload-dev maps (no
// `composer install` needed to run the tests; a wrong map in composer.json fails them).
$composer = json_decode((string) file_get_contents(__DIR__ . '/../composer.json'), true, 512, JSON_THROW_ON_ERROR);
$prefixes = ($composer['autoload']['psr-4'] ?? []) + ($composer['autoload-dev']['psr-4'] ?? []);
uksort($prefixes, static fn (string $a, string $b) => strlen($b) <=> strlen($a)); // the longest prefix first
spl_autoload_register(static function (string $class) use ($prefixes): void {
    foreach ($prefixes as $prefix => $dir) {
        if (str_starts_with($class, $prefix)) {
            $file = __DIR__ . '/../' . $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
            return;
        }
    }
});
