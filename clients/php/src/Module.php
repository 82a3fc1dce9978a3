<?php

declare(strict_types=1);

namespace Pont;

/** What every module shares: the transport, and the check that required arguments are there. */
abstract class Module
{
    public function __construct(protected readonly Transport $http)
    {
    }

    /** @param array<string, mixed> $values */
    protected static function required(string $method, array $values): void
    {
        foreach ($values as $name => $value) {
            if ($value === null || $value === '' || $value === []) {
                throw new ValidationError("$method: $name is required");
            }
        }
    }

    /** @param array<string, mixed> $query */
    protected function getJson(string $path, array $query = []): mixed
    {
        return $this->http->request('GET', $path, $query);
    }

    protected function postJson(string $path, mixed $body = null, bool $idempotent = true): mixed
    {
        return $this->http->request('POST', $path, [], $body ?? new \stdClass(), $idempotent);
    }

    /** The body of a secret rotation: the server's default overlap unless one is given. */
    protected static function overlap(?int $overlapSeconds): object
    {
        return $overlapSeconds === null ? new \stdClass() : (object) ['overlap_seconds' => $overlapSeconds];
    }

    protected static function segment(string $value): string
    {
        return rawurlencode($value);
    }
}
