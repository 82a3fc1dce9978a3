<?php

declare(strict_types=1);

namespace Pont;

final class Records extends Module
{
    /**
     * Records by type ('all' by default); a single type pages with cursor (next_cursor).
     *
     * @param array{type?: string, limit?: int, cursor?: string, since?: string} $options
     * @return array<string, mixed>
     */
    public function get(string $healthId, array $options = []): array
    {
        self::required('records->get', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patient/' . self::segment($healthId) . '/records', $options);
    }

    /** @param array<string, mixed> $fields @return array<string, mixed> */
    public function pushEncounter(array $fields): array
    {
        self::required('records->pushEncounter', ['health_id' => $fields['health_id'] ?? null, 'encounter_type' => $fields['encounter_type'] ?? null]);
        return $this->postJson('/api/v1/sdk/records/encounters', $fields);
    }

    /** @param array<string, mixed> $fields @return array<string, mixed> */
    public function pushLabResult(array $fields): array
    {
        self::required('records->pushLabResult', [
            'health_id' => $fields['health_id'] ?? null,
            'test_name' => $fields['test_name'] ?? null,
            'result_value' => $fields['result_value'] ?? null,
            'flagged' => $fields['flagged'] ?? null,
        ]);
        return $this->postJson('/api/v1/sdk/records/lab-results', $fields);
    }
}
