<?php

declare(strict_types=1);

namespace Pont;

final class Inventory extends Module
{
    /**
     * Stock lines by facility and medication, with their batches (next_offset pages).
     *
     * @param array{facility_id?: string, medication?: string, below_reorder_level?: bool, limit?: int, offset?: int} $filters
     * @return array<string, mixed>
     */
    public function pharmacyStock(array $filters = []): array
    {
        return $this->getJson('/api/v1/connect/pharmacy/stock', $filters);
    }

    /** @param array{facility_id?: string, blood_group?: string, component?: string} $filters @return array<string, mixed> */
    public function bloodInventory(array $filters = []): array
    {
        return $this->getJson('/api/v1/connect/blood-bank/inventory', $filters);
    }
}
