<?php

declare(strict_types=1);

namespace Pont;

/**
 * What every module shares: the transport, the check that required arguments are there, and paging. Every method
 * takes, last, an options array (Transport's RequestOptions): idempotency_key, timeout, deadline, max_retries,
 * headers, purpose_of_use, emergency_reason, cancel (a callable answering true to stop: CancelledError).
 *
 * @phpstan-import-type RequestOptions from Transport
 */
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

    /** @param array<string, mixed> $query @param RequestOptions $options */
    protected function getJson(string $path, array $query = [], array $options = []): mixed
    {
        return $this->http->request('GET', $path, $query, options: $options);
    }

    /**
     * Connect and SDK POSTs: the server keeps the answer of a request with an Idempotency-Key, so one is sent.
     *
     * @param RequestOptions $options
     */
    protected function postJson(string $path, mixed $body = null, array $options = []): mixed
    {
        return $this->http->request('POST', $path, [], $body ?? new \stdClass(), true, $options);
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

    /**
     * A list paged by next_cursor (sent back as cursor).
     *
     * @param array<string, mixed> $query
     * @param RequestOptions $options
     * @param null|callable(array<string, mixed>): list<mixed> $items
     */
    protected function cursorList(string $path, array $query, string $itemsKey, array $options, ?callable $items = null): Listing
    {
        $fetch = fn (array $query): \Closure => fn (): array => $this->getJson($path, $query, $options);
        return new Listing(
            $fetch($query),
            \Closure::fromCallable($items ?? static fn (array $p) => $p[$itemsKey] ?? []),
            static fn (array $p): ?\Closure => ($p['next_cursor'] ?? null) !== null ? $fetch(['cursor' => $p['next_cursor']] + $query) : null,
        );
    }

    /**
     * A list paged by next_offset (sent back as offset).
     *
     * @param array<string, mixed> $query
     * @param RequestOptions $options
     */
    protected function offsetList(string $path, array $query, string $itemsKey, array $options): Listing
    {
        $fetch = fn (array $query): \Closure => fn (): array => $this->getJson($path, $query, $options);
        return new Listing(
            $fetch($query),
            static fn (array $p) => $p[$itemsKey] ?? [],
            static fn (array $p): ?\Closure => ($p['next_offset'] ?? null) !== null ? $fetch(['offset' => $p['next_offset']] + $query) : null,
        );
    }

    /**
     * A list the server answers in one page.
     *
     * @param array<string, mixed> $query
     * @param RequestOptions $options
     */
    protected function singleList(string $path, array $query, string $itemsKey, array $options): Listing
    {
        return new Listing(fn (): array => $this->getJson($path, $query, $options), static fn (array $p) => $p[$itemsKey] ?? [], static fn () => null);
    }

    /**
     * A FHIR Bundle (a searchset or a history) that $first requests: its resources, then those of its next link's
     * pages (the link's path and query on our base URL, so credentials never leave it).
     *
     * @param \Closure(): array<string, mixed> $first
     * @param RequestOptions $options
     */
    protected function bundleList(\Closure $first, array $options): Listing
    {
        return new Listing(
            $first,
            static fn (array $b) => array_values(array_map(static fn ($e) => $e['resource'], array_filter($b['entry'] ?? [], static fn ($e) => isset($e['resource'])))),
            function (array $b) use ($options): ?\Closure {
                foreach ($b['link'] ?? [] as $link) {
                    if (($link['relation'] ?? '') === 'next') {
                        $url = $this->http->sameOrigin($link['url']);
                        return fn (): array => $this->http->request('GET', '', options: $options, url: $url, accept: 'application/fhir+json');
                    }
                }
                return null;
            },
        );
    }
}
