<?php

declare(strict_types=1);

namespace Pont;

final class Consents extends Module
{
    /** @param array<string, mixed> $fields @return array<string, mixed> */
    public function request(array $fields): array
    {
        self::required('consents->request', ['health_id' => $fields['health_id'] ?? null, 'purpose' => $fields['purpose'] ?? null, 'requested_scopes' => $fields['requested_scopes'] ?? null]);
        return $this->postJson('/api/v1/sdk/consents/request', $fields);
    }

    /** @param array<string, mixed> $fields @return array<string, mixed> */
    public function grant(string $healthId, array $fields): array
    {
        self::required('consents->grant', ['healthId' => $healthId, 'consent_type' => $fields['consent_type'] ?? null, 'expires_at' => $fields['expires_at'] ?? null]);
        return $this->postJson('/api/v1/connect/patient/' . self::segment($healthId) . '/consent/grant', $fields);
    }

    /** @return array<string, mixed> */
    public function status(string $healthId): array
    {
        self::required('consents->status', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patient/' . self::segment($healthId) . '/consent');
    }

    /** @param array<string, mixed> $fields @return array<string, mixed> */
    public function revoke(string $healthId, array $fields = []): array
    {
        self::required('consents->revoke', ['healthId' => $healthId]);
        return $this->postJson('/api/v1/connect/patient/' . self::segment($healthId) . '/consent/revoke', $fields === [] ? null : $fields);
    }
}
