<?php

declare(strict_types=1);

namespace Pont;

/**
 * @internal How a list is paged: the request of its first page, the items of a page, and the request of the page
 * after a page (null on the last one). Nothing is requested until one of them is called.
 */
final class Listing
{
    /**
     * @param \Closure(): array<string, mixed> $first
     * @param \Closure(array<string, mixed>): list<mixed> $items
     * @param \Closure(array<string, mixed>): (null|\Closure(): array<string, mixed>) $next
     */
    public function __construct(public readonly \Closure $first, public readonly \Closure $items, public readonly \Closure $next)
    {
    }

    /** @return \Generator<int, array<string, mixed>> every page in turn, one request each, as the iteration reaches it */
    public function pages(): \Generator
    {
        for ($fetch = $this->first; $fetch !== null; $fetch = ($this->next)($page)) {
            $page = $fetch();
            yield $page;
        }
    }

    /** @return \Generator<int, mixed> every item of every page (only the current page is held) */
    public function items(): \Generator
    {
        $key = 0;
        foreach ($this->pages() as $page) {
            foreach (($this->items)($page) as $item) {
                yield $key++ => $item; // keys run on across pages, so iterator_to_array keeps every item
            }
        }
    }
}
