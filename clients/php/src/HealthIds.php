<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type HealthIdResolveRequest from Types
 * @phpstan-import-type HealthIdResolveResponse from Types
 * @phpstan-import-type HealthIdVerifyResponse from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class HealthIds extends Module
{
    /**
     * Finds the patient by health_id, or by first_name, last_name, date_of_birth (creating them when none matches).
     *
     * @param HealthIdResolveRequest $fields
     * @param RequestOptions $options
     * @return HealthIdResolveResponse
     */
    public function resolve(array $fields, array $options = []): array
    {
        self::required('healthIds->resolve', ['fields' => $fields]);
        if (($fields['health_id'] ?? null) === null) {
            self::required('healthIds->resolve', ['first_name' => $fields['first_name'] ?? null]);
        }
        return $this->postJson('/api/v1/connect/patients/resolve', $fields, $options);
    }

    /**
     * @param array{purpose?: string, external_reference?: string} $query
     * @param RequestOptions $options
     * @return HealthIdVerifyResponse
     */
    public function verify(string $healthId, array $query = [], array $options = []): array
    {
        self::required('healthIds->verify', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patients/verify/' . self::segment($healthId), $query, $options);
    }
}
