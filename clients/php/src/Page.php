<?php

declare(strict_types=1);

namespace Pont;

/**
 * One page of a list or a FHIR search: the answer (readable as an array: $page['entry']), its items ($page->data),
 * its request id, and every item of this page and the next ones, fetched one page at a time as the iteration
 * reaches them: `foreach ($page as $item)` (or $page->autoPagingIterator(), a Generator).
 *
 * @implements \ArrayAccess<string, mixed>
 * @implements \IteratorAggregate<int, mixed>
 */
final class Page implements \ArrayAccess, \IteratorAggregate
{
    /** @var list<mixed> the items of this page */
    public readonly array $data;
    public readonly ?string $requestId;
    /** @var \Closure(array<string, mixed>): ?Page */
    private \Closure $next;

    /**
     * @param array<string, mixed> $body
     * @param callable(array<string, mixed>): list<mixed> $items
     * @param callable(array<string, mixed>): ?Page $next
     */
    public function __construct(public readonly array $body, callable $items, callable $next, ?Response $response = null)
    {
        $this->data = array_values($items($body));
        $this->next = \Closure::fromCallable($next);
        $this->requestId = $response?->requestId;
    }

    public function nextPage(): ?Page
    {
        return ($this->next)($this->body);
    }

    /** @return \Generator<int, mixed> */
    public function autoPagingIterator(): \Generator
    {
        for ($page = $this; $page !== null; $page = $page->nextPage()) {
            foreach ($page->data as $item) {
                yield $item; // keys run on across pages (not `yield from`), so iterator_to_array keeps every item
            }
        }
    }

    /** @return \Generator<int, mixed> */
    public function getIterator(): \Generator
    {
        return $this->autoPagingIterator();
    }

    public function offsetExists(mixed $offset): bool
    {
        return isset($this->body[$offset]);
    }

    public function offsetGet(mixed $offset): mixed
    {
        return $this->body[$offset] ?? null;
    }

    public function offsetSet(mixed $offset, mixed $value): void
    {
        throw new \LogicException('A Page is read-only');
    }

    public function offsetUnset(mixed $offset): void
    {
        throw new \LogicException('A Page is read-only');
    }
}
