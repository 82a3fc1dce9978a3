<?php

declare(strict_types=1);

namespace Pont;

/**
 * A Bridge agent of a facility: new BridgeAgent(agentId: …, agentKey: …, facilityId: …, baseUrl: …). Every
 * request carries the agent's id, key and the time; $clockSkew (seconds, server minus local: a 401 says the server's
 * time) corrects a wrong clock. The constructor makes no request.
 *
 * @phpstan-import-type BridgeHeartbeatAck from Types
 * @phpstan-import-type BridgeSyncResult from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class BridgeAgent
{
    private readonly Transport $http;
    public float $clockSkew;

    /** @param array<string, mixed> $settings Transport's: maxRetries, timeout, connectTimeout, deadline, backoff, sender, sleep, clock, random, onRequest, onResponse */
    public function __construct(
        public readonly string $agentId,
        #[\SensitiveParameter] string $agentKey,
        public readonly string $facilityId,
        string $environment = 'sandbox',
        ?string $baseUrl = null,
        float $clockSkew = 0.0,
        array $settings = [],
    ) {
        if ($agentId === '' || $agentKey === '' || $facilityId === '') {
            throw new ValidationError('BridgeAgent: agentId, agentKey and facilityId are required');
        }
        $this->clockSkew = $clockSkew;
        $this->http = new Transport(Pont::baseUrlOf($environment, $baseUrl), ...$settings);
        $this->http->credentials = fn (bool $force): array => [
            'X-Bridge-Agent-ID' => $agentId, 'X-Bridge-Agent-Key' => $agentKey, 'X-Bridge-Timestamp' => (string) (int) (microtime(true) + $this->clockSkew),
        ];
    }

    /**
     * Records the contact and the agent's software $version; the answer's config says how often to sync.
     *
     * @param RequestOptions $options
     * @return BridgeHeartbeatAck
     */
    public function heartbeat(string $version, array $options = []): array
    {
        if ($version === '') {
            throw new ValidationError('BridgeAgent->heartbeat: version is required');
        }
        return $this->http->request('POST', '/api/v1/bridge/heartbeat', body: ['agent_id' => $this->agentId, 'facility_id' => $this->facilityId, 'version' => $version], options: $options, repeatable: true);
    }

    /**
     * Sends a batch (at most 1000 resources). $batchId (a new one by default; keep it until the answer is stored) is
     * also sent as the Idempotency-Key: a resend after a lost answer gets the first answer. $groups: lists of indexes
     * in $resources written together or not at all (an HL7 message's resources).
     *
     * @param list<array<string, mixed>> $resources
     * @param RequestOptions $options
     * @param list<list<int>>|null $groups
     * @return BridgeSyncResult
     */
    public function sync(array $resources, ?string $batchId = null, array $options = [], ?array $groups = null): array
    {
        if ($resources === []) {
            throw new ValidationError('BridgeAgent->sync: resources is required');
        }
        $batchId ??= $options['idempotency_key'] ?? bin2hex(random_bytes(16));
        $body = ['batch_id' => $batchId, 'resources' => array_values($resources)];
        if ($groups !== null) {
            $body['groups'] = array_map(static fn (array $group) => array_values($group), array_values($groups));
        }
        return $this->http->request('POST', '/api/v1/bridge/sync', body: $body, options: ['idempotency_key' => $batchId] + $options);
    }

    public function lastResponse(): ?Response
    {
        return $this->http->lastResponse;
    }

    public function close(): void
    {
        $this->http->close();
    }

    /** @return array<string, string> never the key */
    public function __debugInfo(): array
    {
        return ['agentId' => $this->agentId, 'baseUrl' => $this->http->baseUrl];
    }
}
