<?php

declare(strict_types=1);

namespace Pont;

final class Inventory extends Module
{
    /** @param array{facility_id?: string, blood_group?: string, component?: string} $filters @return array<string, mixed> */
    public function bloodInventory(array $filters = []): array
    {
        return $this->getJson('/api/v1/connect/blood-bank/inventory', $filters);
    }
}
