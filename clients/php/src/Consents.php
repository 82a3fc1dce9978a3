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
    /** The signed consent artefact, `['artefact' => '<compact JWS>']`; verify it with verifiedArtefact or Artefacts::verify. @param RequestOptions $options @return array<string, mixed> */
    public function artefact(string $consentId, array $options = []): array
    {
        self::required('consents->artefact', ['consentId' => $consentId]);
        return $this->getJson('/api/v1/connect/consents/' . self::segment($consentId) . '/artefact', [], $options);
    }

    /** The artefact, fetched and verified with Pont's key set (/.well-known/jwks.json): its payload, or ArtefactVerificationError. @param RequestOptions $options @return array<string, mixed> */
    public function verifiedArtefact(string $consentId, array $options = []): array
    {
        $artefact = $this->artefact($consentId, $options)['artefact'];
        return Artefacts::verify($artefact, $this->getJson('/.well-known/jwks.json', [], $options));
    }

    /** The caller's organisation's consents revoked since `$since` (ISO date-time): `['items' => [[consent_id, revoked_at], …]]`. @param RequestOptions $options @return array<string, mixed> */
    public function revoked(string $since, array $options = []): array
    {
        self::required('consents->revoked', ['since' => $since]);
        return $this->getJson('/api/v1/connect/consents/revoked', ['since' => $since], $options);
    }
}
