<?php

declare(strict_types=1);

namespace Pont;

/**
 * The sandbox demo.
 *
 * @phpstan-type DemoReset array{environment: string, organization_id: string, facility_id: string, clients: list<array{name: string, client_id: string, client_secret: string, scopes: list<string>}>, bridge_agent: array{agent_id: string, agent_key: string, facility_id: string}, patients: list<array{health_id: string, patient_id: string}>, replaced: array{fhir_resources: int, clients: int, bridge_agents: int, patient_tokens: int, events: int, webhook_deliveries: int, webhook_subscriptions_kept: int}, seeded: array<string, mixed>}
 * @phpstan-import-type RequestOptions from Transport
 */
final class Demo extends Module
{
    /**
     * Wipes and seeds the demo organisation (development and sandbox only; production: NotFoundError). Sent with this
     * client's token: in development the route is open (the token is ignored); in sandbox the client must be an
     * operator's (`pont clients create --all-patients`; any other: AuthorizationError). The demo's clients are
     * replaced: use the answer's clients from then on. Not retried without the caller's 'idempotency_key' (the server
     * does not deduplicate it; a reset asked for while another runs is a ConflictError with Retry-After).
     *
     * @param RequestOptions $options
     * @return DemoReset
     */
    public function reset(array $options = []): array
    {
        return $this->http->request('POST', '/api/demo/reset', body: new \stdClass(), options: $options);
    }
}
