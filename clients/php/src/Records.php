<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type EncounterPush from Types
 * @phpstan-import-type EncounterPushed from Types
 * @phpstan-import-type LabResultPush from Types
 * @phpstan-import-type LabResultPushed from Types
 * @phpstan-import-type PatientRecords from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Records extends Module
{
    use Paging;

    /**
     * Records by type ('all' by default): the first page. autoPagingIterator('get', $healthId, ['type' => …]) yields
     * the records of one type across its pages (next_cursor).
     *
     * @param array{type?: string, limit?: int, cursor?: string, since?: string} $query
     * @param RequestOptions $options
     * @return PatientRecords
     */
    #[Paged]
    public function get(string $healthId, array $query = [], array $options = []): array
    {
        self::required('records->get', ['healthId' => $healthId]);
        return $this->listed($this->cursorList('/api/v1/connect/patient/' . self::segment($healthId) . '/records', $query, 'records', $options,
            static fn (array $p) => $p['records'][$p['type'] ?? $query['type'] ?? ''] ?? []));
    }

    /**
     * @param EncounterPush $fields
     * @param RequestOptions $options
     * @return EncounterPushed
     */
    public function pushEncounter(array $fields, array $options = []): array
    {
        self::required('records->pushEncounter', ['health_id' => $fields['health_id'] ?? null, 'encounter_type' => $fields['encounter_type'] ?? null]);
        return $this->postJson('/api/v1/sdk/records/encounters', $fields, $options);
    }

    /**
     * @param LabResultPush $fields
     * @param RequestOptions $options
     * @return LabResultPushed
     */
    public function pushLabResult(array $fields, array $options = []): array
    {
        self::required('records->pushLabResult', [
            'health_id' => $fields['health_id'] ?? null,
            'test_name' => $fields['test_name'] ?? null,
            'result_value' => $fields['result_value'] ?? null,
            'flagged' => $fields['flagged'] ?? null,
        ]);
        return $this->postJson('/api/v1/sdk/records/lab-results', $fields, $options);
    }
}
