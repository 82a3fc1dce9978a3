<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type BloodInventory from Types
 * @phpstan-import-type PharmacyStock from Types
 * @phpstan-import-type PharmacyStockApplied from Types
 * @phpstan-import-type PharmacyStockUpdate from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Inventory extends Module
{
    use Paging;

    /**
     * Stock lines by facility and medication, with their batches: the first page. autoPagingIterator('pharmacyStock',
     * …) yields every line, following next_offset.
     *
     * @param array{facility_id?: string, medication?: string, below_reorder_level?: bool, limit?: int, offset?: int} $query
     * @param RequestOptions $options
     * @return PharmacyStock
     */
    #[Paged]
    public function pharmacyStock(array $query = [], array $options = []): array
    {
        return $this->listed($this->offsetList('/api/v1/connect/pharmacy/stock', $query, 'items', $options));
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
     * Blood units by facility, group and component ($answer['items'], one page).
     *
     * @param array{facility_id?: string, blood_group?: string, component?: string} $query
     * @param RequestOptions $options
     * @return BloodInventory
     */
    #[Paged]
    public function bloodInventory(array $query = [], array $options = []): array
    {
        return $this->listed($this->singleList('/api/v1/connect/blood-bank/inventory', $query, 'items', $options));
    }
}
