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
    protected function cursorPage(string $path, array $query, string $itemsKey, array $options, ?callable $items = null): Page
    {
        $answer = $this->getJson($path, $query, $options);
        return new Page(
            $answer,
            $items ?? static fn (array $p) => $p[$itemsKey] ?? [],
            fn (array $p) => ($p['next_cursor'] ?? null) !== null ? $this->cursorPage($path, ['cursor' => $p['next_cursor']] + $query, $itemsKey, $options, $items) : null,
            $this->http->lastResponse,
        );
    }

    /** @param array<string, mixed> $answer */
    protected function singlePage(array $answer, string $itemsKey): Page
    {
        return new Page($answer, static fn (array $p) => $p[$itemsKey] ?? [], static fn () => null, $this->http->lastResponse);
    }

    /**
     * A FHIR Bundle (a searchset or a history): its resources, then those of its next link's pages.
     *
     * @param array<string, mixed> $bundle
     * @param RequestOptions $options
     */
    protected function bundlePage(array $bundle, array $options): Page
    {
        return new Page(
            $bundle,
            static fn (array $b) => array_values(array_map(static fn ($e) => $e['resource'], array_filter($b['entry'] ?? [], static fn ($e) => isset($e['resource'])))),
            function (array $b) use ($options): ?Page {
                foreach ($b['link'] ?? [] as $link) {
                    if (($link['relation'] ?? '') === 'next') {
                        $next = $this->http->request('GET', '', options: $options, url: $this->http->sameOrigin($link['url']), accept: 'application/fhir+json');
                        return $this->bundlePage($next, $options);
                    }
                }
                return null;
            },
            $this->http->lastResponse,
        );
    }
}
