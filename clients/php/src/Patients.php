<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type PairingCode from Types
 * @phpstan-import-type PatientProfile from Types
 * @phpstan-import-type PatientSummary from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Patients extends Module
{
    /**
     * @param RequestOptions $options
     * @return PatientSummary
     */
    public function getSummary(string $healthId, array $options = []): array
    {
        self::required('patients->getSummary', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/sdk/patients/' . self::segment($healthId) . '/summary', [], $options);
    }

    /**
     * @param array{purpose?: string, external_reference?: string} $query
     * @param RequestOptions $options
     * @return PatientProfile
     */
    public function search(string $healthId, array $query = [], array $options = []): array
    {
        self::required('patients->search', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patient/search', ['health_id' => $healthId] + $query, $options);
    }

    /**
     * A one-time code with which the patient pairs their app.
     *
     * @param RequestOptions $options
     * @return PairingCode
     */
    public function issuePairingCode(string $healthId, array $options = []): array
    {
        self::required('patients->issuePairingCode', ['healthId' => $healthId]);
        return $this->postJson('/api/v1/connect/patient/' . self::segment($healthId) . '/mobile/pairing-code', null, $options);
    }
}
