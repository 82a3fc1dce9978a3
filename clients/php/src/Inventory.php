<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type PharmacyStockApplied from Types
 * @phpstan-import-type PharmacyStockUpdate from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Inventory extends Module
{
    /**
     * Stock lines by facility and medication, with their batches; iterating the Page follows next_offset.
     *
     * @param array{facility_id?: string, medication?: string, below_reorder_level?: bool, limit?: int, offset?: int} $query
     * @param RequestOptions $options
     */
    public function pharmacyStock(array $query = [], array $options = []): Page
    {
        return new Page($this->getJson('/api/v1/connect/pharmacy/stock', $query, $options), static fn (array $p) => $p['items'] ?? [],
            fn (array $p) => ($p['next_offset'] ?? null) !== null ? $this->pharmacyStock(['offset' => $p['next_offset']] + $query, $options) : null,
            $this->http->lastResponse);
    }

    /**
     * Sets stock levels.
     *
     * @param PharmacyStockUpdate $fields
     * @param RequestOptions $options
     * @return PharmacyStockApplied
     */
    public function updatePharmacyStock(array $fields, array $options = []): array
    {
        self::required('inventory->updatePharmacyStock', ['items' => $fields['items'] ?? null]);
        return $this->http->request('PUT', '/api/v1/connect/pharmacy/stock', body: $fields, options: $options);
    }

    /**
     * @param array{facility_id?: string, blood_group?: string, component?: string} $query
     * @param RequestOptions $options
     */
    public function bloodInventory(array $query = [], array $options = []): Page
    {
        return $this->singlePage($this->getJson('/api/v1/connect/blood-bank/inventory', $query, $options), 'items');
    }
}
