<?php

declare(strict_types=1);

namespace Pont;

/**
 * What the modules with lists share. A list method (marked #[Paged]) answers its first page as a plain array, the
 * server's answer as it is (a FHIR Bundle, or an object with its items and next_cursor or next_offset); the whole
 * list is read through this module's explicit iterators, given the list method's name and its own arguments:
 *
 *     foreach ($pont->fhir->autoPagingIterator('search', 'Observation', ['patient' => 'Patient/1']) as $observation) { … }
 *     foreach ($pont->webhooks->pages('deliveries', ['limit' => 50]) as $page) { … $page['deliveries'] … }
 *
 * The arguments are checked at once (a missing one: ValidationError, before any request); the pages are fetched one
 * at a time as the iteration reaches them, and only the current page is held.
 */
trait Paging
{
    private bool $listingOnly = false;
    private ?Listing $listing = null;

    /**
     * Every item of the list: a FHIR search's resources, a cursor or offset list's items, page after page.
     *
     * @return \Generator<int, mixed>
     */
    public function autoPagingIterator(string $method, mixed ...$arguments): \Generator
    {
        return $this->listingOf($method, $arguments)->items();
    }

    /**
     * Every page of the list, each the plain array its request answered (the first is what $method itself answers).
     *
     * @return \Generator<int, array<string, mixed>>
     */
    public function pages(string $method, mixed ...$arguments): \Generator
    {
        return $this->listingOf($method, $arguments)->pages();
    }

    /**
     * What a list method answers: the first page; inside autoPagingIterator() and pages(), nothing is fetched and
     * the listing is handed over instead.
     *
     * @return array<string, mixed>
     */
    protected function listed(Listing $listing): array
    {
        if ($this->listingOnly) {
            $this->listing = $listing;
            return [];
        }
        return ($listing->first)();
    }

    /** @param array<int|string, mixed> $arguments */
    private function listingOf(string $method, array $arguments): Listing
    {
        $lists = array_values(array_map(static fn (\ReflectionMethod $m) => $m->getName(), array_filter(
            (new \ReflectionObject($this))->getMethods(\ReflectionMethod::IS_PUBLIC),
            static fn (\ReflectionMethod $m) => $m->getAttributes(Paged::class) !== [],
        )));
        if (!in_array($method, $lists, true)) {
            $class = substr(static::class, (int) strrpos(static::class, '\\') + 1);
            throw new ValidationError("$class: $method is not a list (the lists: " . implode(', ', $lists) . ')');
        }
        $this->listingOnly = true;
        $this->listing = null;
        try {
            $this->{$method}(...$arguments);
            $listing = $this->listing;
        } finally {
            $this->listingOnly = false;
            $this->listing = null;
        }
        assert($listing instanceof Listing);
        return $listing;
    }
}
