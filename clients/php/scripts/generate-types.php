<?php

declare(strict_types=1);

/**
 * Generates src/Types.php, the array shapes (PHPStan/Psalm types) of what the client sends and receives, from the
 * OpenAPI document the server publishes (components.schemas): the shapes are the server's, never written twice.
 *
 *     php scripts/generate-types.php openapi.json        # or a URL: http://127.0.0.1:8080/api/openapi.json
 *
 * The live test compares src/Types.php with what this makes from the running server's document.
 */

namespace Pont\Generate;

const OUT = __DIR__ . '/../src/Types.php';

/** @param mixed $s a JSON Schema */
function typeOf(mixed $s, string $indent = ''): string
{
    if (!is_array($s)) {
        return 'mixed';
    }
    if (isset($s['$ref'])) {
        return substr($s['$ref'], strrpos($s['$ref'], '/') + 1);
    }
    if (array_key_exists('const', $s)) {
        return var_export($s['const'], true);
    }
    if (isset($s['enum'])) {
        return union(array_map(static fn ($v) => $v === null ? 'null' : var_export($v, true), $s['enum']));
    }
    if (isset($s['anyOf']) || isset($s['oneOf'])) {
        return union(array_map(static fn ($x) => typeOf($x, $indent), $s['anyOf'] ?? $s['oneOf']));
    }
    $types = (array) ($s['type'] ?? (isset($s['properties']) ? 'object' : []));
    if ($types === []) {
        return 'mixed';
    }
    return union(array_map(static fn ($t) => match ($t) {
        'string' => 'string',
        'integer' => 'int',
        'number' => 'float',
        'boolean' => 'bool',
        'null' => 'null',
        'array' => 'list<' . typeOf($s['items'] ?? null, $indent) . '>',
        'object' => isset($s['properties']) && $s['properties'] !== [] ? shape($s, $indent) : 'array<string, mixed>',
        default => 'mixed',
    }, $types));
}

/** @param list<string> $parts */
function union(array $parts): string
{
    $parts = array_values(array_unique($parts));
    return in_array('mixed', $parts, true) ? 'mixed' : implode('|', $parts);
}

/** @param array<string, mixed> $s an object schema with properties */
function shape(array $s, string $indent): string
{
    $required = $s['required'] ?? [];
    $fields = [];
    foreach ($s['properties'] as $name => $property) {
        $key = preg_match('/^[A-Za-z_][A-Za-z0-9_]*$/', (string) $name) === 1 ? $name : var_export((string) $name, true);
        $fields[] = $key . (in_array($name, $required, true) ? '' : '?') . ': ' . typeOf($property, $indent);
    }
    return 'array{' . implode(', ', $fields) . '}';
}

/** @param array<string, mixed> $schemas components.schemas */
function render(array $schemas): string
{
    ksort($schemas);
    $lines = [];
    foreach ($schemas as $name => $schema) {
        $lines[] = " * @phpstan-type $name " . typeOf($schema);
    }
    return "<?php\n\ndeclare(strict_types=1);\n\nnamespace Pont;\n\n/**\n"
        . " * The interface's shapes as array types, generated from the OpenAPI document by scripts/generate-types.php: do not\n"
        . " * edit. Import one with `@phpstan-import-type LabResultPush from Types` (Psalm reads them as well).\n *\n"
        . implode("\n", $lines) . "\n */\nfinal class Types\n{\n}\n";
}

if (realpath($_SERVER['SCRIPT_FILENAME'] ?? '') === __FILE__) {
    $document = json_decode((string) file_get_contents($argv[1] ?? 'php://stdin'), true, 512, JSON_THROW_ON_ERROR);
    file_put_contents(OUT, render($document['components']['schemas']));
}
