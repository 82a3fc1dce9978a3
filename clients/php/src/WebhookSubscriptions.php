<?php

declare(strict_types=1);

namespace Pont;

/** The instance's webhooks module: subscriptions, replay, and the same two helpers as \Pont\Webhooks. */
final class WebhookSubscriptions extends Module
{
    /**
     * Subscribes an HTTPS endpoint; the answer's webhook_secret is shown only this once.
     *
     * @param list<string> $events
     * @return array<string, mixed>
     */
    public function subscribe(string $callbackUrl, array $events, string $description = ''): array
    {
        self::required('webhooks->subscribe', ['callbackUrl' => $callbackUrl, 'events' => $events]);
        return $this->postJson('/api/v1/connect/webhooks/subscriptions', ['callback_url' => $callbackUrl, 'subscribed_events' => array_values($events), 'description' => $description]);
    }

    /** @return array<string, mixed> */
    public function list(): array
    {
        return $this->getJson('/api/v1/connect/webhooks/subscriptions');
    }

    public function unsubscribe(string $subscriptionId): void
    {
        self::required('webhooks->unsubscribe', ['subscriptionId' => $subscriptionId]);
        $this->http->request('DELETE', '/api/v1/connect/webhooks/subscriptions/' . self::segment($subscriptionId));
    }

    /** @return array<string, mixed> */
    public function replay(string $eventId): array
    {
        self::required('webhooks->replay', ['eventId' => $eventId]);
        return $this->postJson('/api/v1/connect/webhooks/events/' . self::segment($eventId) . '/replay', null, false);
    }

    /**
     * Replaces the subscription's signing secret (the answer's webhook_secret, shown only this once). For
     * $overlapSeconds (server default 86400; 0: none) deliveries are signed with both secrets.
     *
     * @return array<string, mixed>
     */
    public function rotateSecret(string $subscriptionId, ?int $overlapSeconds = null): array
    {
        self::required('webhooks->rotateSecret', ['subscriptionId' => $subscriptionId]);
        return $this->postJson('/api/v1/connect/webhooks/subscriptions/' . self::segment($subscriptionId) . '/rotate-secret', self::overlap($overlapSeconds));
    }

    public function verifySignature(string $rawBody, ?string $signatureHeader, string $secret, int $tolerance = Webhooks::DEFAULT_TOLERANCE, ?int $now = null): bool
    {
        return Webhooks::verifySignature($rawBody, $signatureHeader, $secret, $tolerance, $now);
    }

    /** @return array<string, mixed> */
    public function parseEvent(string $rawBody, ?string $signatureHeader, string $secret, int $tolerance = Webhooks::DEFAULT_TOLERANCE, ?int $now = null): array
    {
        return Webhooks::parseEvent($rawBody, $signatureHeader, $secret, $tolerance, $now);
    }
}
