<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type ConsentGrantRequest from Types
 * @phpstan-import-type ConsentRequestCreate from Types
 * @phpstan-import-type ConsentRequestCreated from Types
 * @phpstan-import-type ConsentStatus from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Consents extends Module
{
    /**
     * @param ConsentRequestCreate $fields
     * @param RequestOptions $options
     * @return ConsentRequestCreated
     */
    public function request(array $fields, array $options = []): array
    {
        self::required('consents->request', ['health_id' => $fields['health_id'] ?? null, 'purpose' => $fields['purpose'] ?? null, 'requested_scopes' => $fields['requested_scopes'] ?? null]);
        return $this->postJson('/api/v1/sdk/consents/request', $fields, $options);
    }

    /**
     * @param ConsentGrantRequest $fields
     * @param RequestOptions $options
     * @return ConsentStatus
     */
    public function grant(string $healthId, array $fields, array $options = []): array
    {
        self::required('consents->grant', ['healthId' => $healthId, 'consent_type' => $fields['consent_type'] ?? null, 'expires_at' => $fields['expires_at'] ?? null]);
        return $this->postJson('/api/v1/connect/patient/' . self::segment($healthId) . '/consent/grant', $fields, $options);
    }

    /** @param RequestOptions $options @return ConsentStatus */
    public function status(string $healthId, array $options = []): array
    {
        self::required('consents->status', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patient/' . self::segment($healthId) . '/consent', [], $options);
    }

    /** @param array<string, mixed> $fields @param RequestOptions $options @return ConsentStatus */
    public function revoke(string $healthId, array $fields = [], array $options = []): array
    {
        self::required('consents->revoke', ['healthId' => $healthId]);
        return $this->postJson('/api/v1/connect/patient/' . self::segment($healthId) . '/consent/revoke', $fields === [] ? null : $fields, $options);
    }
}
